// Backend selection and the world communicator.
#include "comm/process_group.h"

#include <unistd.h>

#include <fmt/format.h>

#include "core/error.h"
#if RINGMASTER_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif

namespace ringmaster {

namespace {

bool isLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

std::string glooHostname(const Rendezvous& rdv, const ProcessGroupOptions& options,
                         const EnvLookup& env, std::string* interface) {
  if (!options.gloo_hostname.empty()) return options.gloo_hostname;
  if (auto ifname = env("GLOO_SOCKET_IFNAME"); ifname && !ifname->empty()) {
    *interface = *ifname;
    return "";
  }
  if (rdv.master_host.empty() || isLoopback(rdv.master_host)) return "127.0.0.1";
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  return name;
}

}  // namespace

bool backendAvailable(const std::string& backend) {
  if (backend == "gloo") return true;
#if RINGMASTER_HAVE_NCCL
  if (backend == "nccl") return true;
#endif
  return false;
}

std::unique_ptr<Communicator> makeCommunicator(const Rendezvous& rdv,
                                               const ProcessGroupOptions& options,
                                               const EnvLookup& env) {
  RM_CHECK_ARG(options.backend == "gloo" || options.backend == "nccl",
               fmt::format("backend '{}': expected gloo or nccl", options.backend));
  if (!backendAvailable(options.backend)) {
    RM_THROW(kUnavailable,
             fmt::format("backend {} is not in this build (it needs the CUDA toolkit's NCCL)",
                         options.backend));
  }
  auto store = std::make_shared<PrefixStore>("world", rdv.store);
  std::unique_ptr<Backend> backend;
  if (options.backend == "gloo") {
    GlooOptions gloo;
    gloo.hostname = glooHostname(rdv, options, env, &gloo.interface);
    gloo.timeout = options.comm.timeout;
    if (rdv.world_size > 1)
      backend = GlooBackend::connect(store, rdv.rank, rdv.world_size, gloo);
    else
      backend = GlooBackend::connect(nullptr, 0, 1, gloo);
  } else {
#if RINGMASTER_HAVE_NCCL
    backend = NcclBackend::connect(store, rdv.rank, rdv.world_size, options.cuda_device,
                                   options.comm.timeout);
#endif
  }
  return std::make_unique<Communicator>(std::move(backend), store, rdv.store, rdv.rank,
                                        rdv.world_size, "world", options.comm);
}

std::unique_ptr<Communicator> initProcessGroup(const ProcessGroupOptions& options,
                                               const EnvLookup& env) {
  InitOptions init = options.init;
  if (init.timeout.count() <= 0) init.timeout = options.comm.timeout;
  Rendezvous rdv = rendezvous(init, env);
  return makeCommunicator(rdv, options, env);
}

}  // namespace ringmaster
