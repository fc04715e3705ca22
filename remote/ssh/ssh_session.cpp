// libssh behind SshSession: options set explicitly (the user's config is parsed by us, never by
// libssh, and strict host-key checking is forced), the known_hosts verdict taken before any
// authentication, and TCP_USER_TIMEOUT on the socket so a silent host ends the connection.
#include "ssh/ssh_session.h"

#include <fcntl.h>
#include <libssh/callbacks.h>
#include <libssh/libssh.h>
#include <libssh/server.h>
#include <libssh/sftp.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/bounded_file.h"
#include "core/error.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;
constexpr unsigned kSilentHostMs = 20000;  // unacknowledged data for this long ends a connection

std::string keyFingerprint(ssh_key key) {
  unsigned char* hash = nullptr;
  size_t length = 0;
  if (ssh_get_publickey_hash(key, SSH_PUBLICKEY_HASH_SHA256, &hash, &length) != 0)
    return "(no fingerprint)";
  char* text = ssh_get_fingerprint_hash(SSH_PUBLICKEY_HASH_SHA256, hash, length);
  std::string out = text ? text : "(no fingerprint)";
  ssh_string_free_char(text);
  ssh_clean_pubkey_hash(&hash);
  return out;
}

// The fingerprints known_hosts holds for the target ("a, b"); libssh's own entry lookup does not
// hand back the key it compared with.
std::string knownFingerprints(const std::string& path, const SshTarget& target) {
  const std::string host =
      target.port == 22 ? target.hostname : fmt::format("[{}]:{}", target.hostname, target.port);
  // Read for an error message: a known_hosts beyond its bound is named rather than read on.
  constexpr uint64_t kMaxKnownHostsBytes = uint64_t{16} << 20;
  std::istringstream in;
  try {
    in.str(readBoundedFile(path, kMaxKnownHostsBytes, "known_hosts file"));
  } catch (const Error& e) {
    return fmt::format("(none readable: {})", e.message());
  }
  std::vector<std::string> found;
  std::string line;
  while (std::getline(in, line)) {
    ssh_knownhosts_entry* entry = nullptr;
    if (ssh_known_hosts_parse_line(host.c_str(), line.c_str(), &entry) == SSH_OK && entry &&
        entry->publickey)
      found.push_back(keyFingerprint(entry->publickey));
    ssh_knownhosts_entry_free(entry);
  }
  return found.empty() ? "(none readable)" : fmt::format("{}", fmt::join(found, ", "));
}

void wipe(std::string& secret) {
  volatile char* p = secret.data();
  for (size_t i = 0; i < secret.size(); ++i) p[i] = 0;
  secret.clear();
}

}  // namespace

// ------------------------------------------------------------------------------------------------
// SshChannel

// sshd reports a command killed by a signal with exit-signal, not exit-status; libssh 0.10 only
// hands that over through a channel callback.
struct SshChannel::Callbacks {
  ssh_channel_callbacks_struct table{};
  std::optional<int> status;
  int signal = 0;
};

namespace {

int signalNumber(std::string_view name) {
  static const std::pair<std::string_view, int> kSignals[] = {
      {"TERM", SIGTERM}, {"KILL", SIGKILL}, {"INT", SIGINT},   {"HUP", SIGHUP},  {"QUIT", SIGQUIT},
      {"SEGV", SIGSEGV}, {"ABRT", SIGABRT}, {"PIPE", SIGPIPE}, {"BUS", SIGBUS},  {"FPE", SIGFPE},
      {"ILL", SIGILL},   {"ALRM", SIGALRM}, {"USR1", SIGUSR1}, {"USR2", SIGUSR2}};
  for (const auto& [known, number] : kSignals)
    if (known == name) return number;
  return SIGKILL;  // a signal the protocol names but we do not: killed all the same
}

}  // namespace

SshChannel::SshChannel(ssh_channel_struct* channel, std::string host)
    : channel_(channel), host_(std::move(host)), callbacks_(std::make_unique<Callbacks>()) {
  ssh_channel_callbacks_struct& table = callbacks_->table;
  ssh_callbacks_init(&table);
  table.userdata = callbacks_.get();
  table.channel_exit_status_function = [](ssh_session, ssh_channel, int status, void* data) {
    static_cast<Callbacks*>(data)->status = status;
  };
  table.channel_exit_signal_function = [](ssh_session, ssh_channel, const char* signal, int,
                                          const char*, const char*, void* data) {
    static_cast<Callbacks*>(data)->signal = signalNumber(signal ? signal : "");
  };
  ssh_set_channel_callbacks(channel_, &table);
}

SshChannel::~SshChannel() {
  // libssh keeps a channel the far side has not closed yet until its close arrives, and would
  // call our callbacks on it after they are freed (an exit status read by a later command on the
  // same session): they go first.
  ssh_remove_channel_callbacks(channel_, &callbacks_->table);
  if (ssh_channel_is_open(channel_)) ssh_channel_close(channel_);
  ssh_channel_free(channel_);
}

bool SshChannel::read(std::string& out, std::string& err, std::chrono::milliseconds timeout) {
  if (out_ended_ && err_ended_) return false;
  const int polled = ssh_channel_poll_timeout(channel_, static_cast<int>(timeout.count()), 0);
  if (polled == SSH_ERROR) {
    RM_THROW(kComm, fmt::format("{}: the SSH connection was lost ({})", host_,
                                ssh_get_error(ssh_channel_get_session(channel_))));
  }
  char buffer[1 << 15];
  for (int is_stderr : {0, 1}) {
    std::string& into = is_stderr ? err : out;
    for (std::size_t taken = 0; taken < kMaxReadBytes;) {
      const int n = ssh_channel_read_nonblocking(channel_, buffer, sizeof buffer, is_stderr);
      if (n == SSH_ERROR) {
        RM_THROW(kComm, fmt::format("{}: the SSH connection was lost ({})", host_,
                                    ssh_get_error(ssh_channel_get_session(channel_))));
      }
      if (n <= 0) break;
      into.append(buffer, static_cast<size_t>(n));
      taken += static_cast<size_t>(n);
    }
  }
  if (ssh_channel_is_eof(channel_) || !ssh_channel_is_open(channel_)) {
    out_ended_ = ssh_channel_poll(channel_, 0) <= 0;
    err_ended_ = ssh_channel_poll(channel_, 1) <= 0;
  }
  return !(out_ended_ && err_ended_);
}

void SshChannel::write(std::string_view data) {
  while (!data.empty()) {
    const int n = ssh_channel_write(channel_, data.data(), static_cast<uint32_t>(data.size()));
    if (n == SSH_ERROR) {
      RM_THROW(kComm, fmt::format("{}: writing to the command failed ({})", host_,
                                  ssh_get_error(ssh_channel_get_session(channel_))));
    }
    data.remove_prefix(static_cast<size_t>(n));
  }
}

void SshChannel::closeInput() {
  if (ssh_channel_is_open(channel_))
    checkSsh(ssh_channel_get_session(channel_), ssh_channel_send_eof(channel_),
             "ssh_channel_send_eof", host_);
}

std::optional<ExitStatus> SshChannel::exit() {
  const int status = ssh_channel_get_exit_status(channel_);  // processes what is pending
  if (callbacks_->signal != 0) return ExitStatus{.exit_code = 0, .signal = callbacks_->signal};
  if (status >= 0) return ExitStatus{.exit_code = status, .signal = 0};
  if (callbacks_->status) return ExitStatus{.exit_code = *callbacks_->status, .signal = 0};
  return std::nullopt;
}

void checkSsh(ssh_session_struct* session, int code, std::string_view call,
              std::string_view where) {
  if (code == SSH_OK) return;
  RM_THROW(kComm, fmt::format("{}: {} failed ({}): {}", where, call, code,
                              session ? ssh_get_error(session) : "no session"));
}

// ------------------------------------------------------------------------------------------------
// Jump hosts (ProxyJump). libssh 0.10 has no jump of its own: its config's ProxyJump becomes a
// ProxyCommand running the system's ssh through a shell, which checks host keys by its own
// rules, not ours. So the jump is ours: a verified session to the jump host, a direct-tcpip
// channel there to the target, and a socket pair whose one end the target's session uses as its
// connection while a thread relays the other end to the channel and back.

struct SshSession::Jump {
  std::unique_ptr<SshSession> session;  // to the jump host (itself maybe through another)
  ssh_channel channel = nullptr;        // direct-tcpip to the target, on `session`
  int relay_fd = -1;                    // our end of the socket pair
  // The target session's end. libssh closes it when ssh_connect fails early, and leaves it open
  // otherwise: it is closed here if it is still this socket (same inode), never a descriptor
  // number something else was given since.
  int session_fd = -1;
  ino_t session_inode = 0;
  std::atomic<bool> stop = false;
  std::thread relay;

  ~Jump() {
    stop = true;
    if (relay.joinable()) relay.join();
    if (relay_fd >= 0) ::close(relay_fd);
    struct stat info {};
    if (session_fd >= 0 && ::fstat(session_fd, &info) == 0 && info.st_ino == session_inode)
      ::close(session_fd);
    if (channel != nullptr) {
      if (ssh_channel_is_open(channel)) ssh_channel_close(channel);
      ssh_channel_free(channel);
    }
  }

  // Until either side ends or `stop`: the channel's bytes to the socket, the socket's to the
  // channel. Runs on `relay`, the only thread that touches `session` once it started.
  void run() {
    std::string pending;  // from the channel, not yet taken by the socket
    char buffer[1 << 15];
    bool channel_ended = false;
    while (!stop) {
      bool moved = false;
      if (pending.empty() && !channel_ended) {
        const int n = ssh_channel_read_nonblocking(channel, buffer, sizeof buffer, 0);
        if (n > 0) {
          pending.assign(buffer, static_cast<size_t>(n));
        } else if (n == SSH_EOF || (n == 0 && ssh_channel_is_eof(channel))) {
          channel_ended = true;
          ::shutdown(relay_fd, SHUT_WR);  // the target's session reads its end of file
        } else if (n < 0) {
          break;  // the jump host's connection failed: the target's session sees its end
        }
      }
      if (!pending.empty()) {
        const ssize_t n =
            ::send(relay_fd, pending.data(), pending.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
        if (n > 0) {
          pending.erase(0, static_cast<size_t>(n));
          moved = true;
        } else if (n < 0 && errno != EAGAIN && errno != EINTR) {
          break;
        }
      }
      const ssize_t n = ::recv(relay_fd, buffer, sizeof buffer, MSG_DONTWAIT);
      if (n > 0) {
        if (ssh_channel_write(channel, buffer, static_cast<uint32_t>(n)) != n) break;
        moved = true;
      } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
        ssh_channel_send_eof(channel);  // the target's session closed: so does the channel
        break;
      }
      if (!moved || channel_ended) waitForEither(!pending.empty());
    }
    ::shutdown(relay_fd, SHUT_RDWR);
  }

  // Waits at most 20 ms for the socket (to read, or to write when `to_write`) or the jump host.
  void waitForEither(bool to_write) {
    pollfd fds[2] = {{relay_fd, static_cast<short>(POLLIN | (to_write ? POLLOUT : 0)), 0},
                     {ssh_get_fd(ssh_channel_get_session(channel)), POLLIN, 0}};
    ::poll(fds, 2, 20);
  }
};

void SshSession::connectThroughJump(const SshConnectOptions& options) {
  const std::string where = describeTarget(target_);
  jump_ = std::make_unique<Jump>();
  try {
    jump_->session = std::make_unique<SshSession>(*target_.via, options);
  } catch (const Error& error) {
    throwError(error.kind(),
               fmt::format("{}: cannot reach it through its jump host: {}", where, error.message()),
               __FILE__, __LINE__);
  }
  ssh_session bastion = jump_->session->session_;
  jump_->channel = ssh_channel_new(bastion);
  if (jump_->channel == nullptr)
    RM_THROW(kComm, where + ": ssh_channel_new on its jump host failed");
  if (ssh_channel_open_forward(jump_->channel, target_.hostname.c_str(), target_.port, "127.0.0.1",
                               0) != SSH_OK) {
    RM_THROW(kComm, fmt::format("{}: its jump host {} refused to forward a connection to {}:{} "
                                "(AllowTcpForwarding?): {}",
                                where, describeTarget(*target_.via), target_.hostname, target_.port,
                                ssh_get_error(bastion)));
  }
  int pair[2];
  if (::socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0)
    RM_THROW(kIo, fmt::format("{}: socketpair: {}", where, std::strerror(errno)));
  jump_->relay_fd = pair[1];
  jump_->session_fd = pair[0];
  struct stat info {};
  ::fstat(pair[0], &info);
  jump_->session_inode = info.st_ino;
  socket_t session_end = pair[0];
  checkSsh(session_, ssh_options_set(session_, SSH_OPTIONS_FD, &session_end),
           "ssh_options_set(SSH_OPTIONS_FD)", where);
  jump_->relay = std::thread([jump = jump_.get()] { jump->run(); });
}

// ------------------------------------------------------------------------------------------------
// SshSession

SshSession::SshSession(SshTarget target, const SshConnectOptions& options)
    : target_(std::move(target)), session_(ssh_new()) {
  if (session_ == nullptr) RM_THROW(kInternal, "ssh_new failed");
  try {
    const bool process_config = false;  // the user's config was read by resolveSshTarget
    const int strict = 1;               // whatever a config says, never accept an unknown key
    const unsigned port = static_cast<unsigned>(target_.port);
    const long seconds = static_cast<long>(options.connect_timeout.count() / 1000);
    const long micros = static_cast<long>(options.connect_timeout.count() % 1000) * 1000;
    const std::string where = describeTarget(target_);
    const auto set = [&](ssh_options_e option, const void* value, std::string_view name) {
      checkSsh(session_, ssh_options_set(session_, option, value),
               fmt::format("ssh_options_set({})", name), where);
    };
    set(SSH_OPTIONS_PROCESS_CONFIG, &process_config, "SSH_OPTIONS_PROCESS_CONFIG");
    set(SSH_OPTIONS_HOST, target_.hostname.c_str(), "SSH_OPTIONS_HOST");
    set(SSH_OPTIONS_PORT, &port, "SSH_OPTIONS_PORT");
    set(SSH_OPTIONS_USER, target_.user.c_str(), "SSH_OPTIONS_USER");
    set(SSH_OPTIONS_STRICTHOSTKEYCHECK, &strict, "SSH_OPTIONS_STRICTHOSTKEYCHECK");
    set(SSH_OPTIONS_KNOWNHOSTS, options.known_hosts_path.c_str(), "SSH_OPTIONS_KNOWNHOSTS");
    set(SSH_OPTIONS_TIMEOUT, &seconds, "SSH_OPTIONS_TIMEOUT");
    set(SSH_OPTIONS_TIMEOUT_USEC, &micros, "SSH_OPTIONS_TIMEOUT_USEC");
    if (target_.via) connectThroughJump(options);
    const auto start = Clock::now();
    if (ssh_connect(session_) != SSH_OK) {
      const std::string reason = ssh_get_error(session_);
      if (Clock::now() - start >= options.connect_timeout ||
          reason.find("imeout") != std::string::npos) {
        RM_THROW(kTimeout, fmt::format("host '{}' ({}:{}): no SSH connection within {} ms ({})",
                                       target_.alias, target_.hostname, target_.port,
                                       options.connect_timeout.count(), reason));
      }
      fail("cannot connect");
    }
    const int fd = ssh_get_fd(session_);
    const int on = 1;
    ::setsockopt(fd, SOL_SOCKET, SO_KEEPALIVE, &on, sizeof on);
    ::setsockopt(fd, IPPROTO_TCP, TCP_USER_TIMEOUT, &kSilentHostMs, sizeof kSilentHostMs);
    verifyHostKey(options);
    authenticate(options);
  } catch (...) {
    ssh_disconnect(session_);
    ssh_free(session_);
    throw;
  }
}

SshSession::~SshSession() {
  ssh_disconnect(session_);
  ssh_free(session_);
}

void SshSession::fail(const std::string& what) const {
  RM_THROW(kComm, fmt::format("host '{}' ({}@{}:{}): {}: {}", target_.alias, target_.user,
                              target_.hostname, target_.port, what, ssh_get_error(session_)));
}

void SshSession::verifyHostKey(const SshConnectOptions& options) {
  ssh_key key = nullptr;
  if (ssh_get_server_publickey(session_, &key) != SSH_OK) fail("the host sent no key");
  fingerprint_ = keyFingerprint(key);
  ssh_key_free(key);

  const std::string where =
      fmt::format("host '{}' ({}:{})", target_.alias, target_.hostname, target_.port);
  switch (ssh_session_is_known_server(session_)) {
    case SSH_KNOWN_HOSTS_OK:
      return;
    case SSH_KNOWN_HOSTS_CHANGED:
    case SSH_KNOWN_HOSTS_OTHER: {
      const std::string known = knownFingerprints(options.known_hosts_path, target_);
      RM_THROW(kComm,
               fmt::format("{}: REFUSED, the host key has changed (known: {}, offered now: {}). "
                           "Someone may be intercepting the connection, or the host was "
                           "reinstalled; if you know it was, remove its old entry from {}",
                           where, known, fingerprint_, options.known_hosts_path));
    }
    case SSH_KNOWN_HOSTS_UNKNOWN:
    case SSH_KNOWN_HOSTS_NOT_FOUND: {
      if (!options.accept_unknown_key || !options.accept_unknown_key(target_, fingerprint_)) {
        RM_THROW(kComm, fmt::format("{}: REFUSED, the host is not in {} (its key: {}); accept "
                                    "it with --accept-new-host-keys or connect once with ssh",
                                    where, options.known_hosts_path, fingerprint_));
      }
      std::error_code error;
      std::filesystem::create_directories(
          std::filesystem::path(options.known_hosts_path).parent_path(), error);
      if (ssh_session_update_known_hosts(session_) != SSH_OK)
        fail(fmt::format("cannot record the host key in {}", options.known_hosts_path));
      return;
    }
    case SSH_KNOWN_HOSTS_ERROR:
      break;
  }
  fail(fmt::format("cannot check the host key against {}", options.known_hosts_path));
}

void SshSession::authenticate(const SshConnectOptions& options) {
  int rc = ssh_userauth_none(session_, nullptr);
  if (rc == SSH_AUTH_SUCCESS) return;
  if (rc == SSH_AUTH_ERROR) fail("authentication failed");
  const int methods = ssh_userauth_list(session_, nullptr);
  std::vector<std::string> tried;

  if ((methods & SSH_AUTH_METHOD_PUBLICKEY) != 0) {
    if (options.use_agent && std::getenv("SSH_AUTH_SOCK") != nullptr) {
      tried.push_back("agent");
      if (ssh_userauth_agent(session_, nullptr) == SSH_AUTH_SUCCESS) return;
    }
    std::vector<std::string> files = target_.identity_files;
    if (files.empty()) {
      const auto home = std::filesystem::path(defaultKnownHostsPath()).parent_path();
      for (const char* name : {"id_ed25519", "id_ecdsa", "id_rsa"})
        if (std::filesystem::exists(home / name)) files.push_back((home / name).string());
    }
    for (const auto& file : files) {
      ssh_key key = nullptr;
      if (ssh_pki_import_privkey_file(file.c_str(), nullptr, nullptr, nullptr, &key) != SSH_OK) {
        std::optional<std::string> passphrase =
            options.passphrase ? options.passphrase(file) : std::nullopt;
        if (!passphrase) {
          tried.push_back(file + " (unreadable or encrypted)");
          continue;
        }
        rc = ssh_pki_import_privkey_file(file.c_str(), passphrase->c_str(), nullptr, nullptr, &key);
        wipe(*passphrase);
        if (rc != SSH_OK) {
          tried.push_back(file + " (wrong passphrase)");
          continue;
        }
      }
      tried.push_back(file);
      rc = ssh_userauth_publickey(session_, nullptr, key);
      ssh_key_free(key);
      if (rc == SSH_AUTH_SUCCESS) return;
      if (rc == SSH_AUTH_ERROR) fail("authentication failed");
    }
  }
  if (target_.password_auth && (methods & SSH_AUTH_METHOD_PASSWORD) != 0 && options.password) {
    if (std::optional<std::string> password = options.password(target_)) {
      tried.push_back("password");
      rc = ssh_userauth_password(session_, nullptr, password->c_str());
      wipe(*password);
      if (rc == SSH_AUTH_SUCCESS) return;
    }
  }
  RM_THROW(kComm, fmt::format("host '{}' ({}@{}:{}): authentication refused (tried: {})",
                              target_.alias, target_.user, target_.hostname, target_.port,
                              tried.empty() ? "nothing usable"
                                            : fmt::format("{}", fmt::join(tried, ", "))));
}

std::unique_ptr<SshChannel> SshSession::start(const std::string& command) {
  ssh_channel channel = ssh_channel_new(session_);
  if (channel == nullptr) fail("cannot open a channel");
  if (ssh_channel_open_session(channel) != SSH_OK) {
    ssh_channel_free(channel);
    fail("cannot open a session channel");
  }
  if (ssh_channel_request_exec(channel, command.c_str()) != SSH_OK) {
    ssh_channel_close(channel);
    ssh_channel_free(channel);
    fail("the host refused to run the command");
  }
  return std::unique_ptr<SshChannel>(new SshChannel(channel, describeTarget(target_)));
}

CommandResult SshSession::run(const std::string& command, std::chrono::milliseconds timeout,
                              std::string_view input) {
  auto channel = start(command);
  if (!input.empty()) channel->write(input);
  channel->closeInput();
  CommandResult result;
  // Cuts out and err to their bound after each read, counting what was cut.
  auto keepWithinBound = [&result] {
    for (std::string* text : {&result.out, &result.err}) {
      if (text->size() <= kMaxCommandOutputBytes) continue;
      result.dropped_bytes += text->size() - kMaxCommandOutputBytes;
      text->resize(kMaxCommandOutputBytes);
    }
  };
  const auto deadline = Clock::now() + timeout;
  for (bool open = true; open; keepWithinBound()) {
    open = channel->read(result.out, result.err, std::chrono::milliseconds(50));
    if (open && Clock::now() > deadline) {
      RM_THROW(kTimeout, fmt::format("{}: `{}` did not finish within {} ms",
                                     describeTarget(target_), command, timeout.count()));
    }
  }
  const std::optional<ExitStatus> ended = channel->exit();
  result.exit_status = ended && ended->signal == 0 ? ended->exit_code : -1;
  return result;
}

void SshSession::upload(const std::string& remote_path, std::string_view content, int mode) {
  sftp_session sftp = sftp_new(session_);
  if (sftp == nullptr) fail("cannot start SFTP");
  struct Closer {
    sftp_session sftp;
    sftp_file file = nullptr;
    ~Closer() {
      if (file) sftp_close(file);
      sftp_free(sftp);
    }
  } closer{sftp};
  if (sftp_init(sftp) != SSH_OK) fail("cannot start SFTP");
  closer.file =
      sftp_open(sftp, remote_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, static_cast<mode_t>(mode));
  if (closer.file == nullptr) fail(fmt::format("cannot create {} by SFTP", remote_path));
  if (sftp_chmod(sftp, remote_path.c_str(), static_cast<mode_t>(mode)) != 0)
    fail(fmt::format("cannot set the mode of {} by SFTP", remote_path));
  constexpr size_t kChunk = 200 * 1024;  // below OpenSSH sftp-server's 256 KiB message limit
  while (!content.empty()) {
    const size_t n = std::min(kChunk, content.size());
    const ssize_t written = sftp_write(closer.file, content.data(), n);
    if (written <= 0) fail(fmt::format("writing {} by SFTP failed", remote_path));
    content.remove_prefix(static_cast<size_t>(written));
  }
}

void SshSession::makeDirectories(const std::string& remote_dir, int mode) {
  sftp_session sftp = sftp_new(session_);
  if (sftp == nullptr) fail("cannot start SFTP");
  const std::unique_ptr<sftp_session_struct, void (*)(sftp_session)> closer(sftp, sftp_free);
  if (sftp_init(sftp) != SSH_OK) fail("cannot start SFTP");
  std::string made;
  for (const std::filesystem::path& part : std::filesystem::path(remote_dir)) {
    made = made.empty() || made == "/" ? made + part.string() : made + "/" + part.string();
    if (part == "/" || sftp_mkdir(sftp, made.c_str(), static_cast<mode_t>(mode)) == 0) continue;
    // sftp-server says "failure" for a directory that is there: asked again, it answers.
    sftp_attributes attributes = sftp_stat(sftp, made.c_str());
    const bool directory = attributes != nullptr && attributes->type == SSH_FILEXFER_TYPE_DIRECTORY;
    sftp_attributes_free(attributes);
    if (!directory) fail(fmt::format("cannot create the directory {} by SFTP", made));
  }
}

void SshSession::keepalive() {
  checkSsh(session_, ssh_send_keepalive(session_), "ssh_send_keepalive", describeTarget(target_));
}

std::string SshSession::libsshVersion() {
  return ssh_version(0);
}

}  // namespace ringmaster
