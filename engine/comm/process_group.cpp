// Backend selection and the world communicator.
#include "comm/process_group.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <optional>

#include <fmt/format.h>

#include "comm/shm/shm_backend.h"
#include "core/error.h"
#if RINGMASTER_HAVE_NCCL
#include "comm/nccl/nccl_backend.h"
#endif

namespace ringmaster {

namespace {

bool isLoopback(const std::string& host) {
  return host == "localhost" || host == "::1" || host.rfind("127.", 0) == 0;
}

// The address of this host's interface that routes to `host` (a UDP socket "connected" there
// sends nothing): the address the peers, which reach the master the same way, can reach us at.
// The host name would do only where it resolves to that interface, which it often does not.
std::optional<std::string> localAddressToward(const std::string& host) {
  addrinfo hints{};
  hints.ai_socktype = SOCK_DGRAM;
  addrinfo* found = nullptr;
  if (::getaddrinfo(host.c_str(), "9", &hints, &found) != 0 || found == nullptr) return {};
  std::optional<std::string> address;
  const int fd = ::socket(found->ai_family, SOCK_DGRAM, 0);
  sockaddr_storage local{};
  socklen_t length = sizeof local;
  if (fd >= 0 && ::connect(fd, found->ai_addr, found->ai_addrlen) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&local), &length) == 0) {
    char text[INET6_ADDRSTRLEN] = {};
    const void* raw =
        local.ss_family == AF_INET6
            ? static_cast<const void*>(&reinterpret_cast<sockaddr_in6*>(&local)->sin6_addr)
            : static_cast<const void*>(&reinterpret_cast<sockaddr_in*>(&local)->sin_addr);
    if (::inet_ntop(local.ss_family, raw, text, sizeof text) != nullptr) address = text;
  }
  if (fd >= 0) ::close(fd);
  ::freeaddrinfo(found);
  return address;
}

std::string glooHostname(const Rendezvous& rdv, const ProcessGroupOptions& options,
                         const EnvLookup& env, std::string* interface) {
  if (!options.gloo_hostname.empty()) return options.gloo_hostname;
  if (auto ifname = env("GLOO_SOCKET_IFNAME"); ifname && !ifname->empty()) {
    *interface = *ifname;
    return "";
  }
  if (rdv.master_host.empty() || isLoopback(rdv.master_host)) return "127.0.0.1";
  if (auto address = localAddressToward(rdv.master_host)) return *address;
  char name[256] = {};
  if (::gethostname(name, sizeof(name) - 1) != 0) return "127.0.0.1";
  return name;
}

// The shared-memory backend when every rank wants it and runs on this host, else nullptr. Every
// rank takes part (one store round) and reaches the same answer: a rank that does not want it
// publishes an identity no other rank has.
std::unique_ptr<Backend> sharedMemoryBackend(const Rendezvous& rdv, std::shared_ptr<Store> store,
                                             const ProcessGroupOptions& options,
                                             const EnvLookup& env) {
  if (rdv.world_size == 1) return nullptr;
  const auto flag = env("RINGMASTER_COMM_SHM");
  const bool wanted = options.shared_memory && !(flag && *flag == "0");
  bool same_host = false;
  if (wanted) {
    same_host =
        ShmBackend::everyRankOnThisHost(*store, rdv.rank, rdv.world_size, options.comm.timeout);
  } else {
    store->set(fmt::format("shm/host/{}", rdv.rank), toBytes(fmt::format("off {}", rdv.rank)));
  }
  if (!same_host) return nullptr;
  ShmOptions shm;
  shm.timeout = options.comm.timeout;
  return ShmBackend::connect(std::move(store), rdv.rank, rdv.world_size, shm);
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
    backend = sharedMemoryBackend(rdv, store, options, env);
    if (backend) {
      // every rank on this host: shared memory
    } else if (rdv.world_size > 1) {
      backend = GlooBackend::connect(store, rdv.rank, rdv.world_size, gloo);
    } else {
      backend = GlooBackend::connect(nullptr, 0, 1, gloo);
    }
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
