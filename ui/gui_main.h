// The desktop application's entry points, called by app/'s ringmaster-desktop (the window) and
// ringmaster-askpass (the SSH_ASKPASS prompt for passphrases and passwords of launches over SSH).
#pragma once

#include <optional>
#include <string>

namespace ringmaster::ui {

struct GuiOptions {
  std::string db_path;
  std::optional<std::string> launch_spec;  // a spec file to launch at once (the demo)
};

// Opens the window and runs the event loop; the exit code. Its jobs run as the `ringmaster` beside
// this program.
int runGui(int argc, char** argv, const GuiOptions& options);

// SSH_ASKPASS: shows `prompt` in a password dialog and prints the answer; exit code 1 when the
// user cancels.
int runAskPass(int argc, char** argv, const std::string& prompt);

}  // namespace ringmaster::ui
