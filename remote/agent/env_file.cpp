// Reading launch.env_file: NAME=VALUE lines checked like launch.env's names (secret-looking ones
// allowed), every problem an error naming the file and line, never the value.
#include "agent/env_file.h"

#include <fmt/format.h>

#include "core/bounded_file.h"
#include "core/error.h"

namespace ringmaster {

std::map<std::string, std::string> parseEnvFile(std::string_view text, const std::string& path) {
  std::map<std::string, std::string> variables;
  std::map<std::string, size_t> first_line;
  size_t number = 0;
  while (!text.empty()) {
    const size_t end = text.find('\n');
    std::string_view line = text.substr(0, end);
    text.remove_prefix(end == std::string_view::npos ? text.size() : end + 1);
    ++number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    const size_t first = line.find_first_not_of(" \t");
    if (first == std::string_view::npos || line[first] == '#') continue;
    const std::string where = fmt::format("launch.env_file {}:{}", path, number);
    const size_t equals = line.find('=');
    if (equals == std::string_view::npos) {
      RM_THROW(kSpec, fmt::format("{}: expected NAME=VALUE (no '=' on the line)", where));
    }
    const std::string name(line.substr(0, equals));
    // The reason names a reserved name itself; a malformed one is not repeated (it may be part
    // of a value put on a line of its own).
    if (std::optional<std::string> why = checkEnvName(name, true))
      RM_THROW(kSpec, fmt::format("{}: {}", where, *why));
    if (std::optional<std::string> why = checkEnvValue(line.substr(equals + 1)))
      RM_THROW(kSpec, fmt::format("{}: {}: {}", where, name, *why));
    if (auto [it, added] = first_line.emplace(name, number); !added) {
      RM_THROW(kSpec, fmt::format("{}: {} is already set on line {}", where, name, it->second));
    }
    if (variables.size() >= static_cast<size_t>(kMaxEnvVariables)) {
      RM_THROW(kSpec, fmt::format("{}: more than {} variables", where, kMaxEnvVariables));
    }
    variables.emplace(name, std::string(line.substr(equals + 1)));
  }
  return variables;
}

std::map<std::string, std::string> readEnvFile(const std::string& path) {
  std::string text;
  try {
    text = readBoundedFile(path, kMaxEnvFileBytes, "launch.env_file");
  } catch (const Error& error) {
    // Too large is a spec problem (the file is not what env_file may name); the message names
    // the file and the bound already.
    if (error.kind() == ErrorKind::kFormat) RM_THROW(kSpec, error.message());
    throw;
  }
  return parseEnvFile(text, path);
}

std::map<std::string, std::string> jobEnvironment(const LaunchSpec& launch) {
  std::map<std::string, std::string> environment = launch.env;
  if (launch.env_file) {
    for (auto& [name, value] : readEnvFile(*launch.env_file)) environment[name] = std::move(value);
  }
  return environment;
}

}  // namespace ringmaster
