// The prompts: one at a time (hosts connect in parallel), secrets never echoed or kept.
#include "cli/ssh_prompts.h"

#include <termios.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <mutex>

#include <fmt/format.h>

#include "process/child_process.h"

namespace ringmaster::cli {

std::optional<std::string> askPassProgram(const std::string& prompt) {
  const char* program = std::getenv("SSH_ASKPASS");
  if (program == nullptr || *program == '\0') return std::nullopt;
  ChildOptions child;
  child.argv = {program, prompt};
  child.stdout_mode = StreamMode::kPipe;
  ChildProcess askpass(child);
  std::string answer;
  char buffer[256];
  for (ssize_t n; answer.size() <= kMaxAskPassBytes &&
                  (n = ::read(askpass.stdoutFd(), buffer, sizeof buffer)) != 0;) {
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) break;
    answer.append(buffer, static_cast<size_t>(n));
  }
  if (answer.size() > kMaxAskPassBytes) {
    askpass.stop(std::chrono::seconds(1));
    fmt::print(stderr, "SSH_ASKPASS {} wrote more than {} bytes: its answer is not used\n", program,
               kMaxAskPassBytes);
    return std::nullopt;
  }
  if (!askpass.wait().ok()) return std::nullopt;
  if (const size_t end = answer.find('\n'); end != std::string::npos) answer.resize(end);
  return answer;
}

namespace {

// A secret typed on the controlling terminal without echo, else from SSH_ASKPASS; none when
// neither is there.
std::optional<std::string> askSecret(const std::string& prompt) {
  static std::mutex one_prompt_at_a_time;
  std::lock_guard<std::mutex> lock(one_prompt_at_a_time);
  const char* require = std::getenv("SSH_ASKPASS_REQUIRE");
  if (require != nullptr && std::string_view(require) == "force") return askPassProgram(prompt);
  FILE* tty = std::fopen("/dev/tty", "r+");
  if (tty == nullptr) return askPassProgram(prompt);
  const int fd = ::fileno(tty);
  termios saved{};
  ::tcgetattr(fd, &saved);
  termios quiet = saved;
  quiet.c_lflag &= ~static_cast<tcflag_t>(ECHO);
  ::tcsetattr(fd, TCSAFLUSH, &quiet);
  fmt::print(tty, "{}", prompt);
  std::fflush(tty);
  std::string passphrase;
  for (int c = std::fgetc(tty); c != EOF && c != '\n'; c = std::fgetc(tty))
    passphrase += static_cast<char>(c);
  ::tcsetattr(fd, TCSAFLUSH, &saved);
  fmt::print(tty, "\n");
  std::fclose(tty);
  return passphrase;
}

// An identity file's passphrase (none: the key is skipped).
std::optional<std::string> askPassphrase(const std::string& identity_file) {
  return askSecret(fmt::format("passphrase for {}: ", identity_file));
}

}  // namespace

SshConnectOptions interactiveConnectOptions(bool accept_new_host_keys,
                                            const std::optional<std::string>& known_hosts) {
  SshConnectOptions options;
  if (known_hosts) options.known_hosts_path = *known_hosts;
  options.accept_unknown_key = [accept_new_host_keys](const SshTarget& target,
                                                      const std::string& fingerprint) {
    if (!accept_new_host_keys) return false;
    // Said even with --quiet: trusting a key is a security decision the user must see.
    fmt::print(stderr, "{} is new: accepting and recording its key {} (--accept-new-host-keys)\n",
               describeTarget(target), fingerprint);
    return true;
  };
  options.passphrase = askPassphrase;
  options.password = [](const SshTarget& target) {
    return askSecret(fmt::format("password for {}@{}: ", target.user, target.hostname));
  };
  return options;
}

}  // namespace ringmaster::cli
