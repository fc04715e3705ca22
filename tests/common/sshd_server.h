// A real OpenSSH sshd for tests: its own throwaway host key, config and authorized_keys in a
// test directory, listening on 127.0.0.1 only, started with -D and killed and reaped by PID.
// Also the throwaway user keys the tests authenticate with (ssh-keygen).
#pragma once

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <sstream>
#include <string>
#include <thread>

#include "common/captured_process.h"
#include "common/proc_files.h"

namespace ringmaster::testing {

inline constexpr const char* kSshd = "/usr/sbin/sshd";

inline std::string readText(const std::filesystem::path& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Why sshd tests cannot run here, or "" when they can.
inline std::string sshdUnavailable() {
  if (!std::filesystem::exists(kSshd)) return "no /usr/sbin/sshd (apt-get install openssh-server)";
  if (!std::filesystem::exists("/usr/bin/ssh-keygen")) return "no ssh-keygen";
  return "";
}

// ssh-keygen -t ed25519 at `path` (and path.pub); an empty passphrase leaves it unencrypted.
inline void makeKey(const std::filesystem::path& path, const std::string& passphrase = "") {
  std::filesystem::remove(path);
  std::filesystem::remove(path.string() + ".pub");
  CapturedProcess keygen("/usr/bin/ssh-keygen", {"-q", "-t", "ed25519", "-N", passphrase, "-C",
                                                 "ringmaster-test", "-f", path.string()});
  if (!keygen.wait(std::chrono::seconds(30)).ok())
    throw std::runtime_error("ssh-keygen failed: " + keygen.err());
}

inline int freeLoopbackPort() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t length = sizeof address;
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &length);
  ::close(fd);
  return ntohs(address.sin_port);
}

inline bool acceptsConnections(int port) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(port));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  const bool ok = ::connect(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
  ::close(fd);
  return ok;
}

// Where an sshd listens: 127.0.0.1 on a free port here, or an address inside a network namespace
// a test created.
struct SshdPlacement {
  std::string netns;                  // "" for this namespace
  std::string address = "127.0.0.1";  // ListenAddress
  int port = 0;                       // 0: a free one (only without netns)
};

// Every process below `ancestor` (by the parent pids in /proc).
inline std::vector<pid_t> descendantsOf(pid_t ancestor) {
  std::map<pid_t, pid_t> parent;
  for (const pid_t pid : processIds()) {
    const std::string text = readProcFile(pid, "stat");
    const size_t close = text.rfind(')');
    if (close == std::string::npos || close + 2 >= text.size()) continue;
    std::istringstream rest(text.substr(close + 2));
    char state = 0;
    pid_t ppid = 0;
    rest >> state >> ppid;
    parent[pid] = ppid;
  }
  std::vector<pid_t> found;
  for (const auto& [pid, ppid] : parent) {
    for (pid_t up = ppid; up > 1; up = parent.count(up) ? parent[up] : 0) {
      if (up == ancestor) {
        found.push_back(pid);
        break;
      }
    }
  }
  return found;
}

class SshdServer {
 public:
  // `authorized_key`: the .pub file of the key allowed in.
  SshdServer(const std::filesystem::path& dir, const std::filesystem::path& authorized_key,
             SshdPlacement placement = {})
      : dir_(dir), placement_(std::move(placement)) {
    std::filesystem::create_directories(dir_);
    makeKey(dir_ / "host_ed25519");
    std::filesystem::copy_file(authorized_key, dir_ / "authorized_keys",
                               std::filesystem::copy_options::overwrite_existing);
    if (::geteuid() == 0) std::filesystem::create_directories("/run/sshd");  // privilege separation
    start(placement_.port);
  }
  ~SshdServer() { stop(); }

  // Restarts on the same port with password authentication on (the tests never know a password:
  // they check who is asked for one).
  void allowPasswords() {
    stop();
    passwords_ = true;
    start(port_);
  }
  // Restarts on the same port with `lines` added to its sshd_config ("AllowTcpForwarding no\n").
  void restartWithConfig(const std::string& lines) {
    stop();
    extra_config_ = lines;
    start(port_);
  }
  // A fresh host key: what a reinstalled (or impersonated) host offers.
  void replaceHostKey() {
    stop();
    makeKey(dir_ / "host_ed25519");
    start(port_);
  }
  // The SHA-256 fingerprint of the current host key, as ssh-keygen prints it.
  std::string hostKeyFingerprint() const {
    CapturedProcess keygen("/usr/bin/ssh-keygen",
                           {"-l", "-E", "sha256", "-f", (dir_ / "host_ed25519.pub").string()});
    keygen.wait(std::chrono::seconds(10));
    const std::string& out = keygen.out();  // "256 SHA256:... comment (ED25519)"
    const size_t begin = out.find("SHA256:");
    return begin == std::string::npos ? out : out.substr(begin, out.find(' ', begin) - begin);
  }
  // Stops the listener and every connection it still serves (a connection whose client went
  // silent would otherwise live on, holding the listener's output pipes).
  void stop() {
    if (!process_) return;
    for (pid_t pid : descendantsOf(process_->pid())) ::kill(pid, SIGKILL);
    process_->signal(SIGTERM);
    process_->wait(std::chrono::seconds(10));
    process_.reset();
  }

  int port() const { return port_; }
  pid_t pid() const { return process_ ? process_->pid() : -1; }
  // The known_hosts line for this server's key.
  std::string knownHostsLine() const {
    std::string key = readText(dir_ / "host_ed25519.pub");
    while (!key.empty() && key.back() == '\n') key.pop_back();
    const std::string host =
        port_ == 22 ? placement_.address : "[" + placement_.address + "]:" + std::to_string(port_);
    return host + " " + key + "\n";
  }
  std::string log() const { return readText(dir_ / "sshd.log"); }

 private:
  // On `port`, or on a free one when 0.
  void start(int port = 0) {
    for (int attempt = 0; attempt < 5; ++attempt) {
      port_ = port != 0 ? port : freeLoopbackPort();
      std::ofstream config(dir_ / "sshd_config");
      config << "Port " << port_ << "\nListenAddress " << placement_.address << "\n"
             << "HostKey " << (dir_ / "host_ed25519").string() << "\n"
             << "PidFile none\nUsePAM no\nStrictModes no\n"
             << "PermitRootLogin " << (passwords_ ? "yes" : "prohibit-password")
             << "\nPasswordAuthentication " << (passwords_ ? "yes" : "no") << "\n"
             << "KbdInteractiveAuthentication no\nPubkeyAuthentication yes\n"
             << "AuthorizedKeysFile " << (dir_ / "authorized_keys").string() << "\n"
             << "Subsystem sftp internal-sftp\nLogLevel VERBOSE\nMaxStartups 64\n"
             << "ClientAliveInterval 0\n"
             << extra_config_;
      config.close();
      std::filesystem::remove(dir_ / "sshd.log");
      std::vector<std::string> argv = {
          "-D", "-e", "-f", (dir_ / "sshd_config").string(), "-E", (dir_ / "sshd.log").string()};
      std::string program = kSshd;
      if (!placement_.netns.empty()) {
        argv.insert(argv.begin(), {"netns", "exec", placement_.netns, kSshd});
        program = "/usr/sbin/ip";
      }
      process_ = std::make_unique<CapturedProcess>(program, argv);
      const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
      while (std::chrono::steady_clock::now() < deadline) {
        if (placement_.netns.empty() ? acceptsConnections(port_)
                                     : log().find("Server listening on") != std::string::npos)
          return;
        std::this_thread::sleep_for(std::chrono::milliseconds(20));
      }
      process_->signal(SIGKILL);
      process_->wait(std::chrono::seconds(5));
      process_.reset();
    }
    throw std::runtime_error("sshd did not start: " + log());
  }

  std::filesystem::path dir_;
  SshdPlacement placement_;
  int port_ = 0;
  bool passwords_ = false;
  std::string extra_config_;
  std::unique_ptr<CapturedProcess> process_;
};

}  // namespace ringmaster::testing
