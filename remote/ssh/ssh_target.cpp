// ssh_config parsing (Host blocks with *, ? and ! patterns; Match blocks are skipped), token
// expansion for IdentityFile (~, %d, %h, %r, %u, %%), name validation and shell quoting.
#include "ssh/ssh_target.h"

#include <pwd.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <sstream>

#include <fmt/format.h>

#include "core/bounded_file.h"
#include "core/error.h"

namespace ringmaster {

namespace {

std::string homeDirectory() {
  if (const char* home = std::getenv("HOME"); home && *home) return home;
  if (const passwd* entry = ::getpwuid(::getuid())) return entry->pw_dir;
  return "";
}

std::string localUserName() {
  if (const passwd* entry = ::getpwuid(::getuid())) return entry->pw_name;
  if (const char* user = std::getenv("USER"); user && *user) return user;
  return "root";
}

std::string lower(std::string text) {
  std::transform(text.begin(), text.end(), text.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return text;
}

// OpenSSH's glob: '*' any run, '?' one character.
bool globMatches(const char* pattern, const char* text) {
  if (*pattern == '\0') return *text == '\0';
  if (*pattern == '*') {
    for (const char* t = text;; ++t) {
      if (globMatches(pattern + 1, t)) return true;
      if (*t == '\0') return false;
    }
  }
  if (*text == '\0') return false;
  if (*pattern == '?' || *pattern == *text) return globMatches(pattern + 1, text + 1);
  return false;
}

// A Host line's pattern list: a negated match excludes, else any positive match includes.
bool hostPatternsMatch(const std::vector<std::string>& patterns, const std::string& host) {
  bool matched = false;
  for (const auto& pattern : patterns) {
    if (!pattern.empty() && pattern[0] == '!') {
      if (globMatches(pattern.c_str() + 1, host.c_str())) return false;
    } else if (globMatches(pattern.c_str(), host.c_str())) {
      matched = true;
    }
  }
  return matched;
}

// "Keyword value", "Keyword=value", with double-quoted arguments.
std::vector<std::string> splitConfigLine(const std::string& line) {
  std::vector<std::string> words;
  std::string current;
  bool quoted = false, has = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      quoted = !quoted;
      has = true;
    } else if (!quoted &&
               (std::isspace(static_cast<unsigned char>(c)) || (c == '=' && words.empty()))) {
      if (has) words.push_back(current);
      current.clear();
      has = false;
    } else if (!quoted && c == '#') {
      break;
    } else {
      current += c;
      has = true;
    }
  }
  if (has) words.push_back(current);
  return words;
}

std::string expandTokens(const std::string& text, const SshTarget& target) {
  std::string out;
  for (size_t i = 0; i < text.size(); ++i) {
    if (i == 0 && text[0] == '~' && (text.size() == 1 || text[1] == '/')) {
      out += homeDirectory();
      continue;
    }
    if (text[i] != '%' || i + 1 == text.size()) {
      out += text[i];
      continue;
    }
    switch (text[++i]) {
      case '%':
        out += '%';
        break;
      case 'd':
        out += homeDirectory();
        break;
      case 'h':
        out += target.hostname;
        break;
      case 'r':
        out += target.user;
        break;
      case 'u':
        out += localUserName();
        break;
      default:
        RM_THROW(kInvalidArgument,
                 fmt::format("host '{}': IdentityFile '{}' uses the token %{}, which is not "
                             "supported (%d, %h, %r, %u, %%)",
                             target.alias, text, text[i]));
    }
  }
  return out;
}

struct ConfigValues {
  std::optional<std::string> hostname, user, proxy_jump;
  std::optional<int> port;
  std::vector<std::string> identity_files;
};

// An ssh config is a few kilobytes: a larger one, or a device, is refused rather than read on.
constexpr uint64_t kMaxSshConfigBytes = uint64_t{1} << 20;

// The text of the ssh config at `path`: "" when there is none (or it cannot be read, as ssh
// does); Error kFormat naming the file when it is beyond kMaxSshConfigBytes.
std::string readConfigText(const std::string& path) {
  if (path.empty() || ::access(path.c_str(), R_OK) != 0) return "";
  return readBoundedFile(path, kMaxSshConfigBytes, "config file for ssh");
}

ConfigValues readConfig(const std::string& path, const std::string& alias) {
  ConfigValues values;
  std::istringstream in(readConfigText(path));
  bool applies = true;  // lines before the first Host apply to every host
  std::string line;
  int line_number = 0;
  while (std::getline(in, line)) {
    ++line_number;
    auto words = splitConfigLine(line);
    if (words.empty()) continue;
    const std::string keyword = lower(words[0]);
    if (keyword == "host") {
      applies = hostPatternsMatch({words.begin() + 1, words.end()}, alias);
      continue;
    }
    if (keyword == "match") {  // conditions ssh evaluates at connect time: not supported
      applies = false;
      continue;
    }
    if (!applies || words.size() < 2) continue;
    const std::string& value = words[1];
    if (keyword == "hostname" && !values.hostname) {
      values.hostname = value;
    } else if (keyword == "user" && !values.user) {
      values.user = value;
    } else if (keyword == "port" && !values.port) {
      try {
        values.port = std::stoi(value);
      } catch (const std::exception&) {
        RM_THROW(kInvalidArgument,
                 fmt::format("{}:{}: Port '{}' is not a number", path, line_number, value));
      }
    } else if (keyword == "identityfile") {
      values.identity_files.push_back(value);
    } else if (keyword == "proxyjump" && !values.proxy_jump && lower(value) != "none") {
      values.proxy_jump = value;
    }
  }
  return values;
}

bool plainName(const std::string& name, bool allow_colon) {
  if (name.empty() || name.size() > 255 || name[0] == '-') return false;
  return std::all_of(name.begin(), name.end(), [&](unsigned char c) {
    return std::isalnum(c) || c == '.' || c == '-' || c == '_' || (allow_colon && c == ':');
  });
}

}  // namespace

std::vector<std::string> sshConfigAliases(const std::string& config_path) {
  std::vector<std::string> aliases;
  std::istringstream in(readConfigText(config_path));
  std::string line;
  while (std::getline(in, line)) {
    const auto words = splitConfigLine(line);
    if (words.empty() || lower(words[0]) != "host") continue;
    for (size_t i = 1; i < words.size(); ++i) {
      const std::string& pattern = words[i];
      if (pattern.find_first_of("*?!") != std::string::npos) continue;
      if (std::find(aliases.begin(), aliases.end(), pattern) == aliases.end())
        aliases.push_back(pattern);
    }
  }
  return aliases;
}

std::string describeTarget(const SshTarget& target) {
  return fmt::format("host '{}' ({}@{}:{})", target.alias, target.user, target.hostname,
                     target.port);
}

std::string defaultSshConfigPath() {
  const std::string home = homeDirectory();
  return home.empty() ? "" : home + "/.ssh/config";
}

std::string defaultKnownHostsPath() {
  return homeDirectory() + "/.ssh/known_hosts";
}

void validateHostName(const std::string& name, const std::string& field) {
  if (!plainName(name, true)) {
    RM_THROW(kInvalidArgument,
             fmt::format("{}: '{}' is not a host name (letters, digits, '.', '-', '_', ':'; not "
                         "starting with '-')",
                         field, name));
  }
}

void validateUserName(const std::string& name, const std::string& field) {
  if (!plainName(name, false) || name.size() > 32) {
    RM_THROW(kInvalidArgument, fmt::format("{}: '{}' is not a user name (letters, digits, '.', "
                                           "'-', '_', at most 32; not starting with '-')",
                                           field, name));
  }
}

namespace {

SshTarget resolveHost(const LaunchHostSpec& host, const std::string& config_path, int hops);

// The chain `text` names (hops joined by commas) in front of host `alias`: the last hop, reached
// through the ones before it.
std::shared_ptr<const SshTarget> resolveJumpChain(const std::string& text,
                                                  const std::string& config_path,
                                                  const std::string& alias, int hops) {
  std::vector<std::string> hop_texts(1);
  for (char c : text) {
    if (c == ',')
      hop_texts.emplace_back();
    else
      hop_texts.back() += c;
  }
  std::shared_ptr<const SshTarget> before;
  for (size_t i = 0; i < hop_texts.size(); ++i) {
    LaunchHostSpec hop =
        parseJumpHop(hop_texts[i], fmt::format("host '{}': ProxyJump '{}'", alias, text));
    if (i > 0) hop.proxy_jump = "none";  // reached through the hop before, whatever its config
    if (++hops > kMaxJumpHops) {
      RM_THROW(kInvalidArgument,
               fmt::format("host '{}': ProxyJump leads through more than {} jump hosts (a loop "
                           "in {}?)",
                           alias, kMaxJumpHops, config_path));
    }
    SshTarget resolved = resolveHost(hop, config_path, hops);
    if (i > 0) resolved.via = before;
    before = std::make_shared<const SshTarget>(std::move(resolved));
  }
  return before;
}

}  // namespace

LaunchHostSpec parseJumpHop(const std::string& text, const std::string& field) {
  LaunchHostSpec hop;
  std::string rest = text;
  if (const size_t at = rest.rfind('@'); at != std::string::npos) {
    hop.user = rest.substr(0, at);
    validateUserName(*hop.user, field + ": user");
    rest.erase(0, at + 1);
  }
  std::optional<std::string> port;
  if (!rest.empty() && rest[0] == '[') {  // [v6 address] or [v6 address]:port
    const size_t close = rest.find(']');
    if (close == std::string::npos || (close + 1 < rest.size() && rest[close + 1] != ':'))
      RM_THROW(kInvalidArgument, fmt::format("{}: '{}' is not [user@]host[:port]", field, text));
    if (close + 1 < rest.size()) port = rest.substr(close + 2);
    rest = rest.substr(1, close - 1);
  } else if (const size_t colon = rest.find(':');
             colon != std::string::npos && rest.find(':', colon + 1) == std::string::npos) {
    port = rest.substr(colon + 1);
    rest.erase(colon);
  }
  validateHostName(rest, field + ": host");
  hop.host = rest;
  if (port) {
    const bool digits = !port->empty() && port->size() <= 5 &&
                        port->find_first_not_of("0123456789") == std::string::npos;
    if (!digits || std::stoi(*port) < 1 || std::stoi(*port) > 65535)
      RM_THROW(kInvalidArgument, fmt::format("{}: port '{}' is not in 1..65535", field, *port));
    hop.port = std::stoi(*port);
  }
  return hop;
}

std::string describeRoute(const SshTarget& target) {
  std::string out = describeTarget(target);
  for (const SshTarget* hop = target.via.get(); hop != nullptr; hop = hop->via.get())
    out += " through " + describeTarget(*hop);
  return out;
}

namespace {

SshTarget resolveHost(const LaunchHostSpec& host, const std::string& config_path, int hops) {
  SshTarget target;
  target.alias = host.host;
  validateHostName(host.host, fmt::format("host '{}'", host.host));
  const ConfigValues config = readConfig(config_path, host.host);
  target.hostname = config.hostname.value_or(host.host);
  validateHostName(target.hostname, fmt::format("host '{}': HostName", host.host));
  target.port = host.port.value_or(config.port.value_or(22));
  if (target.port < 1 || target.port > 65535)
    RM_THROW(kInvalidArgument,
             fmt::format("host '{}': port {} is outside 1..65535", host.host, target.port));
  target.user = host.user.value_or(config.user.value_or(localUserName()));
  validateUserName(target.user, fmt::format("host '{}': user", host.host));
  if (host.identity_file)
    target.identity_files.push_back(expandTokens(*host.identity_file, target));
  for (const auto& file : config.identity_files)
    target.identity_files.push_back(expandTokens(file, target));
  const std::optional<std::string>& jump = host.proxy_jump ? host.proxy_jump : config.proxy_jump;
  if (jump && lower(*jump) != "none")
    target.via = resolveJumpChain(*jump, config_path, host.host, hops);
  return target;
}

}  // namespace

SshTarget resolveSshTarget(const LaunchHostSpec& host, const std::string& config_path) {
  SshTarget target = resolveHost(host, config_path, 0);
  return target;
}

}  // namespace ringmaster
