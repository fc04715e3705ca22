// The listen address, the loopback rule and the access token.
#include "access.h"

#include <arpa/inet.h>
#include <sys/random.h>

#include <cerrno>
#include <charconv>
#include <fstream>

#include <fmt/format.h>

#include "core/bounded_file.h"
#include "core/error.h"

namespace ringmaster::web {

namespace {

bool isNumericAddress(const std::string& host) {
  in_addr v4{};
  in6_addr v6{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 || inet_pton(AF_INET6, host.c_str(), &v6) == 1;
}

std::string_view trim(std::string_view text) {
  while (!text.empty() && (text.front() == ' ' || text.front() == '\t' || text.front() == '\r'))
    text.remove_prefix(1);
  while (!text.empty() && (text.back() == ' ' || text.back() == '\t' || text.back() == '\r'))
    text.remove_suffix(1);
  return text;
}

}  // namespace

ListenAddress parseListenAddress(std::string_view text) {
  const auto bad = [&](std::string_view why) {
    RM_THROW(
        kInvalidArgument,
        fmt::format("--listen '{}': {} (expected HOST:PORT, e.g. 127.0.0.1:8765 or [::1]:8765)",
                    text, why));
  };
  ListenAddress address;
  std::string_view host = text, port;
  if (text.starts_with('[')) {
    const size_t close = text.find(']');
    if (close == std::string_view::npos) bad("no closing ']'");
    host = text.substr(1, close - 1);
    std::string_view rest = text.substr(close + 1);
    if (!rest.empty()) {
      if (!rest.starts_with(':')) bad("expected ':' after ']'");
      port = rest.substr(1);
      if (port.empty()) bad("empty port");
    }
  } else if (const size_t colon = text.rfind(':'); colon != std::string_view::npos) {
    if (text.find(':') != colon) bad("an IPv6 address goes in brackets");
    host = text.substr(0, colon);
    port = text.substr(colon + 1);
    if (port.empty()) bad("empty port");
  }
  if (host.empty()) bad("empty host");
  address.host = std::string(host);
  if (!isNumericAddress(address.host)) bad("the host must be a numeric IPv4 or IPv6 address");
  if (!port.empty()) {
    int value = -1;
    const auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (ec != std::errc() || end != port.data() + port.size() || value < 0 || value > 65535)
      bad("the port must be an integer in 0..65535");
    address.port = value;
  }
  return address;
}

bool isLoopbackAddress(std::string_view host) {
  const std::string text(host);
  in_addr v4{};
  if (inet_pton(AF_INET, text.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, text.c_str(), &v6) != 1) return false;
  if (IN6_IS_ADDR_LOOPBACK(&v6)) return true;
  return IN6_IS_ADDR_V4MAPPED(&v6) && v6.s6_addr[12] == 127;
}

bool tokenRequired(const ListenAddress& address) {
  return !isLoopbackAddress(address.host);
}

std::string generateToken() {
  unsigned char bytes[32];
  size_t filled = 0;
  while (filled < sizeof bytes) {
    const ssize_t got = getrandom(bytes + filled, sizeof bytes - filled, 0);
    if (got < 0) {
      if (errno == EINTR) continue;
      RM_THROW(kIo, fmt::format("reading random bytes for the access token: errno {}", errno));
    }
    filled += static_cast<size_t>(got);
  }
  std::string hex;
  for (unsigned char byte : bytes) hex += fmt::format("{:02x}", byte);
  return hex;
}

std::string readTokenFile(const std::string& path) {
  // A token is one short line: the file is read only up to a bound (a FIFO or /dev/zero too).
  constexpr uint64_t kMaxTokenFileBytes = uint64_t{64} << 10;
  std::string text;
  try {
    text = readBoundedFile(path, kMaxTokenFileBytes, "token file");
  } catch (const Error& e) {
    RM_THROW(kInvalidArgument,
             fmt::format("--token-file {}: cannot read the token: {}", path, e.message()));
  }
  const std::string line = text.substr(0, text.find('\n'));
  const std::string token(trim(line));
  if (token.size() < 16)
    RM_THROW(kInvalidArgument,
             fmt::format("--token-file {}: the token must have at least 16 characters", path));
  return token;
}

bool constantTimeEquals(std::string_view a, std::string_view b) {
  // Every byte of the presented value is looked at whatever the lengths; the lengths themselves
  // (64 hex digits for a generated token) are no secret.
  unsigned char difference = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    const unsigned char expected = b.empty() ? 0 : static_cast<unsigned char>(b[i % b.size()]);
    difference |= static_cast<unsigned char>(a[i]) ^ expected;
  }
  return difference == 0;
}

std::optional<std::string> presentedToken(std::string_view authorization_header,
                                          const std::optional<std::string>& token_parameter,
                                          std::string_view cookie_header) {
  constexpr std::string_view kBearer = "Bearer ";
  if (authorization_header.starts_with(kBearer))
    return std::string(trim(authorization_header.substr(kBearer.size())));
  if (token_parameter) return token_parameter;
  // "a=1; ringmaster_token=T; b=2"
  const std::string prefix = std::string(kTokenCookie) + "=";
  while (!cookie_header.empty()) {
    const size_t end = cookie_header.find(';');
    const std::string_view pair = trim(cookie_header.substr(0, end));
    if (pair.starts_with(prefix)) return std::string(pair.substr(prefix.size()));
    if (end == std::string_view::npos) break;
    cookie_header.remove_prefix(end + 1);
    while (cookie_header.starts_with(' ')) cookie_header.remove_prefix(1);
  }
  return std::nullopt;
}

}  // namespace ringmaster::web
