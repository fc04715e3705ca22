// ringmaster-askpass PROMPT: the SSH_ASKPASS of the runs the window launches, a password dialog
// that prints the answer on stdout (exit code 1 when cancelled). OpenSSH and `ringmaster run` call
// it with the prompt as its only argument.
#include <cstdio>
#include <string>

#include "cli/desktop_launch.h"
#include "exit_codes.h"
#include "gui_main.h"

int main(int argc, char** argv) {
  using namespace ringmaster;
  if (argc != 2) {
    std::fputs("usage: ringmaster-askpass PROMPT (the SSH_ASKPASS of Ringmaster's window)\n",
               stderr);
    return kExitUsage;
  }
  if (!cli::displayAvailable()) {
    std::fputs("ringmaster-askpass: no display (neither DISPLAY nor WAYLAND_DISPLAY is set)\n",
               stderr);
    return kExitFailed;
  }
  const std::string prompt = argv[1];
  return runReportingErrors([&] { return ui::runAskPass(argc, argv, prompt); });
}
