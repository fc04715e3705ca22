// Init methods with PyTorch's meanings: "env://" (MASTER_ADDR, MASTER_PORT, RANK, WORLD_SIZE from
// the environment), "tcp://host:port" and "file:///path" (rank and world size given by the caller).
// Each yields the store the ranks rendezvous through; rank 0 hosts the TCP store, unless
// TORCHELASTIC_USE_AGENT_STORE=True says the launching agent hosts it, as torchrun's does.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>

#include "comm/store.h"

namespace ringmaster {

struct InitOptions {
  std::string init_method = "env://";
  int rank = -1;        // -1: from RANK (env://); required for tcp:// and file://
  int world_size = -1;  // -1: from WORLD_SIZE (env://); required for tcp:// and file://
  Millis timeout{std::chrono::seconds(300)};
};

struct Rendezvous {
  std::shared_ptr<Store> store;
  int rank = 0;
  int world_size = 1;
  std::string init_method;
  std::string master_host;  // the store's host for env:// and tcp:// (empty for file://)
};

// Reads one environment variable; std::nullopt when unset. Tests pass their own.
using EnvLookup = std::function<std::optional<std::string>(const std::string&)>;
EnvLookup processEnvironment();

// Validates the options and the environment, naming every bad or missing variable in one
// kInvalidArgument error, then connects to (or, on rank 0, hosts) the store.
Rendezvous rendezvous(const InitOptions& options, const EnvLookup& env = processEnvironment());

}  // namespace ringmaster
