// Who may talk to the web server: the listen address (host:port, IPv4 or bracketed IPv6), whether
// an address is loopback (then no token is needed), the access token (read from a file or
// generated: 32 random bytes in hex) and its constant-time check against a request's Bearer header
// or ?token= parameter. No HTTP library here: the server and the command line both use it.
#pragma once

#include <optional>
#include <string>
#include <string_view>

namespace ringmaster::web {

struct ListenAddress {
  std::string host;  // "127.0.0.1", "::1", "0.0.0.0", ... (IPv6 without brackets)
  int port = 8765;   // 0: any free port
};

// "HOST:PORT", "[V6]:PORT" or "HOST" (port 8765). Throws kInvalidArgument naming the text for
// anything else (a port outside 0..65535, an empty host, a name that is not a numeric address).
ListenAddress parseListenAddress(std::string_view text);

// 127.0.0.0/8 and ::1 (and ::ffff:127.x.y.z): only this machine can connect.
bool isLoopbackAddress(std::string_view host);

// The rule: any address that is not loopback needs a token.
bool tokenRequired(const ListenAddress& address);

// 32 bytes from the system's random source, as 64 lowercase hex digits.
std::string generateToken();

// The token in `path`: its first line, surrounding white space removed. Throws kInvalidArgument
// naming the path when it cannot be read, holds more than 64 KiB (read no further: a FIFO or
// /dev/zero is refused, not read on) or a token of fewer than 16 characters.
std::string readTokenFile(const std::string& path);

// Compares in time that depends only on the lengths, never on where they first differ.
bool constantTimeEquals(std::string_view a, std::string_view b);

// The cookie the server sets once a page was opened with ?token= (HttpOnly, SameSite=Strict), so
// that the page's own scripts and styles, which a browser fetches without the token, pass too.
inline constexpr char kTokenCookie[] = "ringmaster_token";

// The token a request presents: "Authorization: Bearer T" first, else the `token` query
// parameter, else the cookie kTokenCookie in the Cookie header.
std::optional<std::string> presentedToken(std::string_view authorization_header,
                                          const std::optional<std::string>& token_parameter,
                                          std::string_view cookie_header = {});

}  // namespace ringmaster::web
