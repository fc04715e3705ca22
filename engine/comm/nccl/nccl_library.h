// NCCL as the NCCL backend sees it, private to engine/comm/nccl: the library opened when the first
// nccl communicator connects (never at start-up, so that a process on the CPU does not map it) and
// the functions the backend calls, by the names the library exports.
#pragma once

#include <nccl.h>

#include <string>

namespace ringmaster {

struct NcclLibrary {
  decltype(&ncclGetErrorString) getErrorString = nullptr;
  decltype(&ncclGetUniqueId) getUniqueId = nullptr;
  decltype(&ncclCommInitRankConfig) commInitRankConfig = nullptr;
  decltype(&ncclCommGetAsyncError) commGetAsyncError = nullptr;
  decltype(&ncclCommFinalize) commFinalize = nullptr;
  decltype(&ncclCommDestroy) commDestroy = nullptr;
  decltype(&ncclCommAbort) commAbort = nullptr;
  decltype(&ncclRedOpCreatePreMulSum) redOpCreatePreMulSum = nullptr;
  decltype(&ncclRedOpDestroy) redOpDestroy = nullptr;
  decltype(&ncclAllReduce) allReduce = nullptr;
  decltype(&ncclBroadcast) broadcast = nullptr;
  decltype(&ncclReduce) reduce = nullptr;
  decltype(&ncclAllGather) allGather = nullptr;
  decltype(&ncclReduceScatter) reduceScatter = nullptr;
  decltype(&ncclSend) send = nullptr;
  decltype(&ncclRecv) recv = nullptr;
  decltype(&ncclGroupStart) groupStart = nullptr;
  decltype(&ncclGroupEnd) groupEnd = nullptr;
};

// NCCL, opened and resolved by the first call (thread safe); kUnavailable, with the message of
// SharedLibrary::open, when it cannot be, and the next call tries again.
const NcclLibrary& nccl();

// Opens NCCL and resolves every function the backend calls; returns the file opened. Needs no
// device (NcclBackend::loadLibrary).
std::string loadNcclLibrary();

}  // namespace ringmaster
