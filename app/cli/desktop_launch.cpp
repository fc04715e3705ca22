// The environment checks and execv behind `ringmaster` with no subcommand (the window) and
// `ringmaster askpass` (the password dialog).
#include "cli/desktop_launch.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster::cli {

namespace fs = std::filesystem;

bool displayAvailable() {
  const char* platform = std::getenv("QT_QPA_PLATFORM");
  if (platform != nullptr && *platform != '\0') return true;  // chosen explicitly (offscreen, ...)
  const char* display = std::getenv("DISPLAY");
  const char* wayland = std::getenv("WAYLAND_DISPLAY");
  return (display != nullptr && *display != '\0') || (wayland != nullptr && *wayland != '\0');
}

std::optional<std::string> besideThisProgram(const std::string& name) {
  std::error_code ec;
  const fs::path self = fs::read_symlink("/proc/self/exe", ec);
  if (ec) return std::nullopt;
  const fs::path program = self.parent_path() / name;
  if (!fs::is_regular_file(program, ec) || ::access(program.c_str(), X_OK) != 0)
    return std::nullopt;
  return program.string();
}

void execProgram(const std::string& program, const std::vector<std::string>& args) {
  std::vector<char*> argv;
  argv.push_back(const_cast<char*>(program.c_str()));
  for (const std::string& arg : args) argv.push_back(const_cast<char*>(arg.c_str()));
  argv.push_back(nullptr);
  std::fflush(stdout);
  std::fflush(stderr);
  ::execv(program.c_str(), argv.data());
  RM_THROW(kUnavailable, fmt::format("cannot start {}: {}", program, std::strerror(errno)));
}

}  // namespace ringmaster::cli
