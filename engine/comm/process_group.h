// initProcessGroup: torch.distributed.init_process_group for Ringmaster. Rendezvous through the
// init method, connect the chosen backend ("gloo" on CPU, "nccl" on CUDA), and return the world
// communicator, from which sub-groups are made with newGroup(). On CPU, a group whose ranks all
// run on one host uses shared memory (backend "shm"); any other uses Gloo over TCP.
#pragma once

#include <memory>
#include <string>

#include "comm/communicator.h"
#include "comm/gloo/gloo_backend.h"
#include "comm/init_method.h"

namespace ringmaster {

struct ProcessGroupOptions {
  std::string backend = "gloo";  // "gloo" | "nccl"
  InitOptions init;              // init method, rank, world size, rendezvous timeout
  CommOptions comm;              // per-operation timeout, watchdog, observer
  int cuda_device = 0;           // nccl: the device this rank drives (LOCAL_RANK, usually)
  // gloo: the address peers reach this rank at. Empty: GLOO_SOCKET_IFNAME's interface when set,
  // 127.0.0.1 when the store is on a loopback address, else this host's name.
  std::string gloo_hostname;
  // gloo: ranks that all run on one host talk through shared memory (comm/shm/, backend name
  // "shm") instead of TCP. Off here, or RINGMASTER_COMM_SHM=0 in any rank's environment, keeps
  // them on Gloo's TCP (benchmarks, tests).
  bool shared_memory = true;
};

// Whether this build carries the backend ("gloo" always; "nccl" with the CUDA toolkit's NCCL).
bool backendAvailable(const std::string& backend);

std::unique_ptr<Communicator> initProcessGroup(const ProcessGroupOptions& options,
                                               const EnvLookup& env = processEnvironment());

// Builds a communicator over an already made rendezvous (tests share one store per thread).
std::unique_ptr<Communicator> makeCommunicator(const Rendezvous& rendezvous,
                                               const ProcessGroupOptions& options,
                                               const EnvLookup& env = processEnvironment());

}  // namespace ringmaster
