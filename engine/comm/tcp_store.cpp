// TcpStore: a poll()-driven server thread holding the map, and a blocking client per rank.
#include "comm/tcp_store.h"

#include <fcntl.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <map>
#include <unordered_map>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;

enum class Command : uint8_t { kSet = 1, kGet, kAdd, kCompareSet, kDelete, kCheck, kNumKeys };
constexpr uint32_t kMaxMessageBytes = 256u << 20;

// --- Wire encoding: little-endian integers, strings as u32 length + bytes.

void putU32(Bytes& out, uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(static_cast<uint8_t>(v >> (8 * i)));
}
void putI64(Bytes& out, int64_t v) {
  auto u = static_cast<uint64_t>(v);
  for (int i = 0; i < 8; ++i) out.push_back(static_cast<uint8_t>(u >> (8 * i)));
}
void putBytes(Bytes& out, const uint8_t* data, size_t n) {
  putU32(out, static_cast<uint32_t>(n));
  out.insert(out.end(), data, data + n);
}
void putBytes(Bytes& out, const Bytes& b) {
  putBytes(out, b.data(), b.size());
}
void putString(Bytes& out, const std::string& s) {
  putBytes(out, reinterpret_cast<const uint8_t*>(s.data()), s.size());
}

// Reads fields from a message; throws on a short message (a protocol error, not a user's).
class Reader {
 public:
  explicit Reader(const Bytes& b) : b_(b) {}
  uint8_t u8() {
    need(1);
    return b_[pos_++];
  }
  uint32_t u32() {
    need(4);
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) v |= uint32_t{b_[pos_++]} << (8 * i);
    return v;
  }
  int64_t i64() {
    need(8);
    uint64_t v = 0;
    for (int i = 0; i < 8; ++i) v |= uint64_t{b_[pos_++]} << (8 * i);
    return static_cast<int64_t>(v);
  }
  Bytes bytes() {
    uint32_t n = u32();
    need(n);
    Bytes out(b_.begin() + static_cast<ptrdiff_t>(pos_),
              b_.begin() + static_cast<ptrdiff_t>(pos_ + n));
    pos_ += n;
    return out;
  }
  std::string string() { return toString(bytes()); }

 private:
  void need(size_t n) const {
    if (pos_ + n > b_.size()) RM_THROW(kComm, "store: truncated message");
  }
  const Bytes& b_;
  size_t pos_ = 0;
};

std::string errnoText(int err) {
  return std::strerror(err);
}

bool writeAll(int fd, const uint8_t* data, size_t n) {
  while (n > 0) {
    ssize_t w = ::send(fd, data, n, MSG_NOSIGNAL);
    if (w < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += w;
    n -= static_cast<size_t>(w);
  }
  return true;
}

bool readAll(int fd, uint8_t* data, size_t n) {
  while (n > 0) {
    ssize_t r = ::recv(fd, data, n, 0);
    if (r == 0) {
      errno = ECONNRESET;
      return false;
    }
    if (r < 0) {
      if (errno == EINTR) continue;
      return false;
    }
    data += r;
    n -= static_cast<size_t>(r);
  }
  return true;
}

Bytes frame(const Bytes& payload) {
  Bytes out;
  out.reserve(payload.size() + 4);
  putU32(out, static_cast<uint32_t>(payload.size()));
  out.insert(out.end(), payload.begin(), payload.end());
  return out;
}

struct AddrInfoDeleter {
  void operator()(addrinfo* a) const { freeaddrinfo(a); }
};
using AddrInfoPtr = std::unique_ptr<addrinfo, AddrInfoDeleter>;

AddrInfoPtr resolve(const std::string& host, int port, bool passive) {
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = passive ? AI_PASSIVE : 0;
  addrinfo* result = nullptr;
  std::string service = std::to_string(port);
  int rc = getaddrinfo(host.empty() ? nullptr : host.c_str(), service.c_str(), &hints, &result);
  if (rc != 0)
    RM_THROW(kComm, fmt::format("store: cannot resolve '{}': {}", host, gai_strerror(rc)));
  return AddrInfoPtr(result);
}

}  // namespace

// ---------------------------------------------------------------------------------------------
// The server: one thread, poll() over the listening socket, the clients and a wake-up eventfd.

class TcpStore::Server {
 public:
  Server(const std::string& host, int port) {
    auto addrs = resolve(host, port, true);
    int last_errno = 0;
    for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) {
        last_errno = errno;
        continue;
      }
      int one = 1;
      ::setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
      if (::bind(fd, a->ai_addr, a->ai_addrlen) == 0 && ::listen(fd, 1024) == 0) {
        listen_fd_ = fd;
        break;
      }
      last_errno = errno;
      ::close(fd);
    }
    if (listen_fd_ < 0) {
      RM_THROW(kComm,
               fmt::format("store: cannot listen on {}:{}: {}", host, port, errnoText(last_errno)));
    }
    sockaddr_storage bound{};
    socklen_t len = sizeof(bound);
    ::getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &len);
    port_ = bound.ss_family == AF_INET6 ? ntohs(reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port)
                                        : ntohs(reinterpret_cast<sockaddr_in*>(&bound)->sin_port);
    wake_fd_ = ::eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
    thread_ = std::thread([this] { serve(); });
  }

  ~Server() {
    uint64_t one = 1;
    [[maybe_unused]] ssize_t w = ::write(wake_fd_, &one, sizeof(one));
    thread_.join();
    for (auto& [fd, client] : clients_) ::close(fd);
    ::close(listen_fd_);
    ::close(wake_fd_);
  }

  int port() const { return port_; }

 private:
  struct Client {
    Bytes inbox;
  };

  void serve() {
    for (;;) {
      std::vector<pollfd> fds;
      fds.push_back({wake_fd_, POLLIN, 0});
      fds.push_back({listen_fd_, POLLIN, 0});
      for (auto& [fd, client] : clients_) fds.push_back({fd, POLLIN, 0});
      if (::poll(fds.data(), fds.size(), -1) < 0) {
        if (errno == EINTR) continue;
        return;
      }
      if (fds[0].revents) return;
      if (fds[1].revents & POLLIN) accept();
      for (size_t i = 2; i < fds.size(); ++i) {
        if (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) {
          if (!readFrom(fds[i].fd)) {
            ::close(fds[i].fd);
            clients_.erase(fds[i].fd);
          }
        }
      }
    }
  }

  void accept() {
    int fd = ::accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (fd < 0) return;
    int one = 1;
    ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
    clients_[fd] = Client{};
  }

  // Reads what is available; answers every complete request. False when the client is gone or
  // broke the protocol.
  bool readFrom(int fd) {
    uint8_t buf[64 * 1024];
    ssize_t r = ::recv(fd, buf, sizeof(buf), MSG_DONTWAIT);
    if (r == 0) return false;
    if (r < 0) return errno == EAGAIN || errno == EINTR;
    Bytes& inbox = clients_[fd].inbox;
    inbox.insert(inbox.end(), buf, buf + r);
    while (inbox.size() >= 4) {
      uint32_t n = uint32_t{inbox[0]} | uint32_t{inbox[1]} << 8 | uint32_t{inbox[2]} << 16 |
                   uint32_t{inbox[3]} << 24;
      if (n > kMaxMessageBytes) return false;
      if (inbox.size() < 4 + size_t{n}) break;
      Bytes request(inbox.begin() + 4, inbox.begin() + 4 + n);
      inbox.erase(inbox.begin(), inbox.begin() + 4 + n);
      Bytes reply;
      try {
        reply.push_back(0);
        handle(request, reply);
      } catch (const std::exception& e) {
        reply.assign(1, 1);
        putString(reply, e.what());
      }
      Bytes framed = frame(reply);
      if (!writeAll(fd, framed.data(), framed.size())) return false;
    }
    return true;
  }

  void handle(const Bytes& request, Bytes& reply) {
    Reader in(request);
    switch (static_cast<Command>(in.u8())) {
      case Command::kSet: {
        std::string key = in.string();
        map_[key] = in.bytes();
        return;
      }
      case Command::kGet: {
        auto it = map_.find(in.string());
        reply.push_back(it != map_.end());
        if (it != map_.end()) putBytes(reply, it->second);
        return;
      }
      case Command::kAdd: {
        std::string key = in.string();
        int64_t delta = in.i64();
        auto it = map_.find(key);
        int64_t value = addToStoredInteger(it != map_.end() ? &it->second : nullptr, key, delta);
        map_[key] = toBytes(std::to_string(value));
        putI64(reply, value);
        return;
      }
      case Command::kCompareSet: {
        std::string key = in.string();
        Bytes expected = in.bytes();
        Bytes desired = in.bytes();
        auto it = map_.find(key);
        if (it == map_.end()) {
          if (expected.empty()) {
            map_[key] = desired;
            putBytes(reply, desired);
          } else {
            putBytes(reply, expected);
          }
        } else {
          if (it->second == expected) it->second = desired;
          putBytes(reply, it->second);
        }
        return;
      }
      case Command::kDelete:
        reply.push_back(map_.erase(in.string()) > 0);
        return;
      case Command::kCheck: {
        uint32_t n = in.u32();
        bool all = true;
        for (uint32_t i = 0; i < n; ++i) all = all && map_.count(in.string()) > 0;
        reply.push_back(all);
        return;
      }
      case Command::kNumKeys:
        putI64(reply, static_cast<int64_t>(map_.size()));
        return;
    }
    RM_THROW(kComm, "store: unknown command");
  }

  int listen_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::thread thread_;
  std::unordered_map<int, Client> clients_;     // touched by the server thread only
  std::unordered_map<std::string, Bytes> map_;  // touched by the server thread only
};

// ---------------------------------------------------------------------------------------------
// The client.

TcpStore::TcpStore(const TcpStoreOptions& options) : host_(options.host), port_(options.port) {
  timeout_ = options.timeout;
  if (options.is_server) {
    server_ = std::make_unique<Server>(options.host, options.port);
    port_ = server_->port();
  }
  RM_CHECK_ARG(port_ > 0 && port_ < 65536, fmt::format("store: bad port {}", port_));
  connectClient(options.timeout);
}

TcpStore::~TcpStore() {
  if (client_fd_ >= 0) ::close(client_fd_);
  server_.reset();
}

void TcpStore::connectClient(Millis timeout) {
  auto deadline = Clock::now() + timeout;
  auto backoff = std::chrono::milliseconds(5);
  std::string last_error;
  for (;;) {
    auto addrs = resolve(host_, port_, false);
    for (addrinfo* a = addrs.get(); a != nullptr; a = a->ai_next) {
      int fd = ::socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
      if (fd < 0) continue;
      if (::connect(fd, a->ai_addr, a->ai_addrlen) == 0) {
        int one = 1;
        ::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
        client_fd_ = fd;
        return;
      }
      last_error = errnoText(errno);
      ::close(fd);
    }
    if (Clock::now() + backoff > deadline) break;
    std::this_thread::sleep_for(backoff);
    backoff = std::min(backoff * 2, std::chrono::milliseconds(200));
  }
  RM_THROW(kTimeout, fmt::format("store: could not connect to {}:{} within {} ms ({})", host_,
                                 port_, timeout.count(), last_error));
}

Bytes TcpStore::roundTrip(const Bytes& request) {
  std::lock_guard<std::mutex> lock(client_mutex_);
  if (client_fd_ < 0) RM_THROW(kComm, fmt::format("store at {}:{}: connection lost", host_, port_));
  Bytes framed = frame(request);
  uint8_t header[4];
  if (!writeAll(client_fd_, framed.data(), framed.size()) || !readAll(client_fd_, header, 4)) {
    int err = errno;
    ::close(client_fd_);
    client_fd_ = -1;
    RM_THROW(kComm, fmt::format("store at {}:{} unreachable: {}", host_, port_, errnoText(err)));
  }
  uint32_t n = uint32_t{header[0]} | uint32_t{header[1]} << 8 | uint32_t{header[2]} << 16 |
               uint32_t{header[3]} << 24;
  Bytes reply(n);
  if (n > kMaxMessageBytes || !readAll(client_fd_, reply.data(), n) || n == 0) {
    int err = errno;
    ::close(client_fd_);
    client_fd_ = -1;
    RM_THROW(kComm, fmt::format("store at {}:{}: broken reply: {}", host_, port_, errnoText(err)));
  }
  if (reply[0] != 0) {
    Bytes rest(reply.begin() + 1, reply.end());
    Reader in(rest);
    RM_THROW(kInvalidArgument, in.string());
  }
  return Bytes(reply.begin() + 1, reply.end());
}

void TcpStore::set(const std::string& key, const Bytes& value) {
  Bytes req{static_cast<uint8_t>(Command::kSet)};
  putString(req, key);
  putBytes(req, value);
  roundTrip(req);
}

Bytes TcpStore::get(const std::string& key) {
  wait({key}, timeout_);
  Bytes req{static_cast<uint8_t>(Command::kGet)};
  putString(req, key);
  Bytes reply = roundTrip(req);
  Reader in(reply);
  if (!in.u8()) RM_THROW(kComm, fmt::format("store: key '{}' was deleted while being read", key));
  return in.bytes();
}

int64_t TcpStore::add(const std::string& key, int64_t delta) {
  Bytes req{static_cast<uint8_t>(Command::kAdd)};
  putString(req, key);
  putI64(req, delta);
  Bytes reply = roundTrip(req);
  return Reader(reply).i64();
}

Bytes TcpStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  Bytes req{static_cast<uint8_t>(Command::kCompareSet)};
  putString(req, key);
  putBytes(req, expected);
  putBytes(req, desired);
  Bytes reply = roundTrip(req);
  return Reader(reply).bytes();
}

bool TcpStore::deleteKey(const std::string& key) {
  Bytes req{static_cast<uint8_t>(Command::kDelete)};
  putString(req, key);
  return roundTrip(req).at(0) != 0;
}

bool TcpStore::check(const std::vector<std::string>& keys) {
  Bytes req{static_cast<uint8_t>(Command::kCheck)};
  putU32(req, static_cast<uint32_t>(keys.size()));
  for (const auto& key : keys) putString(req, key);
  return roundTrip(req).at(0) != 0;
}

int64_t TcpStore::numKeys() {
  Bytes reply = roundTrip(Bytes{static_cast<uint8_t>(Command::kNumKeys)});
  return Reader(reply).i64();
}

void TcpStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  pollUntilPresent(keys, timeout);
}

}  // namespace ringmaster
