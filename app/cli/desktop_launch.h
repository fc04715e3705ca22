// How the Qt-free `ringmaster` reaches the desktop programs built beside it: whether a window can
// open here, where a sibling executable is, and replacing this process with one. It links no Qt
// and never starts the window itself.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace ringmaster::cli {

// True when a window can be shown here: a display server is reachable, or QT_QPA_PLATFORM names
// a platform that needs none (offscreen).
bool displayAvailable();

// `name` in the directory of the running executable (/proc/self/exe), when an executable file is
// there; nullopt otherwise.
std::optional<std::string> besideThisProgram(const std::string& name);

// Replaces this process with `program`, given `args` after its own path as argv[1..] (never
// through a shell). Returns only by throwing kUnavailable, naming the program and the reason.
[[noreturn]] void execProgram(const std::string& program, const std::vector<std::string>& args);

}  // namespace ringmaster::cli
