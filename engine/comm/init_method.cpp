// Parsing of init-method URLs and the environment, then store construction.
#include "comm/init_method.h"

#include <cstdlib>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "comm/file_store.h"
#include "comm/tcp_store.h"
#include "core/error.h"

namespace ringmaster {

namespace {

std::optional<long long> parseInt(const std::string& text) {
  if (text.empty()) return std::nullopt;
  char* end = nullptr;
  errno = 0;
  long long v = std::strtoll(text.c_str(), &end, 10);
  if (errno != 0 || *end != '\0') return std::nullopt;
  return v;
}

// Splits "host:port" or "[v6]:port".
bool splitHostPort(const std::string& text, std::string* host, std::string* port) {
  if (!text.empty() && text[0] == '[') {
    auto close = text.find(']');
    if (close == std::string::npos || close + 1 >= text.size() || text[close + 1] != ':')
      return false;
    *host = text.substr(1, close - 1);
    *port = text.substr(close + 2);
    return true;
  }
  auto colon = text.rfind(':');
  if (colon == std::string::npos) return false;
  *host = text.substr(0, colon);
  *port = text.substr(colon + 1);
  return !host->empty();
}

}  // namespace

EnvLookup processEnvironment() {
  return [](const std::string& name) -> std::optional<std::string> {
    const char* v = std::getenv(name.c_str());
    if (v == nullptr) return std::nullopt;
    return std::string(v);
  };
}

Rendezvous rendezvous(const InitOptions& options, const EnvLookup& env) {
  const std::string& url = options.init_method;
  std::vector<std::string> problems;
  int rank = options.rank;
  int world = options.world_size;

  // Reads an integer variable into *out unless the caller gave it (>= 0).
  auto intFromEnv = [&](const char* name, int* out, long long min) {
    if (*out >= 0) return;
    auto value = env(name);
    if (!value) {
      problems.push_back(fmt::format("{} is not set", name));
      return;
    }
    auto parsed = parseInt(*value);
    if (!parsed || *parsed < min || *parsed > 1 << 20) {
      problems.push_back(fmt::format("{}='{}' is not an integer >= {}", name, *value, min));
      return;
    }
    *out = static_cast<int>(*parsed);
  };
  auto checkPort = [&](const std::string& where, const std::string& text) -> int {
    auto port = parseInt(text);
    if (!port || *port < 1 || *port > 65535) {
      problems.push_back(fmt::format("{}='{}' is not a port number (1-65535)", where, text));
      return 0;
    }
    return static_cast<int>(*port);
  };

  Rendezvous result;
  result.init_method = url;
  std::string host;
  int port = 0;
  std::string file_path;
  bool agent_hosts_store = false;  // torchrun's convention: the launching agent hosts the store
  if (url == "env://" || url.rfind("env://", 0) == 0) {
    auto addr = env("MASTER_ADDR");
    if (!addr || addr->empty())
      problems.push_back("MASTER_ADDR is not set");
    else
      host = *addr;
    auto port_text = env("MASTER_PORT");
    if (!port_text)
      problems.push_back("MASTER_PORT is not set");
    else
      port = checkPort("MASTER_PORT", *port_text);
    intFromEnv("WORLD_SIZE", &world, 1);
    intFromEnv("RANK", &rank, 0);
    auto agent_store = env("TORCHELASTIC_USE_AGENT_STORE");
    agent_hosts_store =
        agent_store && (*agent_store == "True" || *agent_store == "true" || *agent_store == "1");
  } else if (url.rfind("tcp://", 0) == 0) {
    std::string port_text;
    if (!splitHostPort(url.substr(6), &host, &port_text)) {
      problems.push_back(fmt::format("init method '{}': expected tcp://HOST:PORT", url));
    } else {
      port = checkPort("tcp:// port", port_text);
    }
  } else if (url.rfind("file://", 0) == 0) {
    file_path = url.substr(7);
    if (file_path.empty() || file_path[0] != '/') {
      problems.push_back(fmt::format("init method '{}': expected file:///ABSOLUTE/PATH", url));
    }
  } else {
    problems.push_back(
        fmt::format("init method '{}': expected env://, tcp://HOST:PORT or file:///PATH", url));
  }
  if (url.rfind("env://", 0) != 0) {
    if (world < 1)
      problems.push_back(
          fmt::format("{}: world_size must be given (>= 1)", url.substr(0, url.find(':'))));
    if (rank < 0)
      problems.push_back(
          fmt::format("{}: rank must be given (>= 0)", url.substr(0, url.find(':'))));
  }
  if (problems.empty() && rank >= world) {
    problems.push_back(fmt::format("RANK={} is out of range for WORLD_SIZE={}", rank, world));
  }
  if (!problems.empty()) {
    RM_THROW(kInvalidArgument, fmt::format("init method {}: {}", url, fmt::join(problems, "; ")));
  }

  result.rank = rank;
  result.world_size = world;
  if (!file_path.empty()) {
    result.store = std::make_shared<FileStore>(file_path, options.timeout);
  } else {
    TcpStoreOptions store;
    store.host = host;
    store.port = port;
    store.is_server = rank == 0 && !agent_hosts_store;
    store.timeout = options.timeout;
    result.master_host = host;
    result.store = std::make_shared<TcpStore>(store);
    // The agent's store outlives a restart (launch.max_restarts): each attempt's workers keep
    // their keys apart, so none reads what the ranks of an earlier attempt left there.
    const std::optional<std::string> restart = env("TORCHELASTIC_RESTART_COUNT");
    if (agent_hosts_store && restart && *restart != "0" && !restart->empty()) {
      result.store = std::make_shared<PrefixStore>("attempt_" + *restart, result.store);
    }
  }
  return result;
}

}  // namespace ringmaster
