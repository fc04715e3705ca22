// The desktop application's entry points, called by the `ringmaster` executable: the window
// itself, and the SSH_ASKPASS prompt it uses for passphrases and passwords of launches over SSH.
#pragma once

#include <optional>
#include <string>

namespace ringmaster::ui {

struct GuiOptions {
  std::string db_path;
  std::optional<std::string> launch_spec;  // a spec file to launch at once (the demo)
};

// True when a window can be shown here: a display server is reachable, or QT_QPA_PLATFORM names
// a platform that needs none (offscreen).
bool displayAvailable();

// Opens the window and runs the event loop; the exit code.
int runGui(int argc, char** argv, const GuiOptions& options);

// SSH_ASKPASS: shows `prompt` in a password dialog and prints the answer; exit code 1 when the
// user cancels.
int runAskPass(int argc, char** argv, const std::string& prompt);

}  // namespace ringmaster::ui
