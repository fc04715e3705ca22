// One SSH connection (libssh) made the way a careful `ssh` makes it: the host key checked against
// known_hosts before any authentication (a changed key is refused with both fingerprints, an
// unknown one only accepted through the caller's confirmation), then the agent, identity files
// (passphrases through a callback) and, only where a host opted in, a password. Commands run on
// channels; files go by SFTP. A session and its channels belong to one thread at a time.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "process/child_process.h"
#include "ssh/ssh_target.h"

struct ssh_session_struct;
struct ssh_channel_struct;

namespace ringmaster {

struct SshConnectOptions {
  std::chrono::milliseconds connect_timeout{10000};
  std::string known_hosts_path = defaultKnownHostsPath();
  // Asked for a host whose key known_hosts lacks, with its SHA-256 fingerprint; true records the
  // key there and goes on. Unset: unknown hosts are refused.
  std::function<bool(const SshTarget& target, const std::string& fingerprint)> accept_unknown_key;
  // Asked for the passphrase of an encrypted identity file; nullopt skips that file.
  std::function<std::optional<std::string>(const std::string& identity_file)> passphrase;
  // Password authentication, only for targets with password_auth: asked after the keys failed.
  std::function<std::optional<std::string>(const SshTarget& target)> password;
  bool use_agent = true;  // SSH_AUTH_SOCK's agent, when set
};

// The most of a command's stdout, and of its stderr, that SshSession::run keeps (issue 32).
inline constexpr std::size_t kMaxCommandOutputBytes = std::size_t{1} << 20;

struct CommandResult {
  int exit_status = -1;        // -1: none came (the channel closed without one)
  std::string out, err;        // each at most kMaxCommandOutputBytes: the first bytes the host sent
  uint64_t dropped_bytes = 0;  // what came past that bound, on both, read and dropped
};

// libssh's results are checked like every other foreign call (docs/errors.md): a `code` other than
// SSH_OK (0) throws kComm naming `where` (the host), the `call` and libssh's own message for
// `session` (which may be null). Every libssh call whose result can fail goes through it or
// through a test of the same result that throws naming the call.
void checkSsh(ssh_session_struct* session, int code, std::string_view call, std::string_view where);

// A command running on the host: its stdin, stdout and stderr.
class SshChannel {
 public:
  ~SshChannel();
  SshChannel(const SshChannel&) = delete;
  SshChannel& operator=(const SshChannel&) = delete;

  // Appends what arrived on stdout and stderr (at most kMaxReadBytes of each a call), waiting at
  // most `timeout` for the first byte; false once both have ended. Throws kComm when the
  // connection failed.
  bool read(std::string& out, std::string& err, std::chrono::milliseconds timeout);
  static constexpr std::size_t kMaxReadBytes = std::size_t{1} << 20;
  void write(std::string_view data);
  void closeInput();  // end of file on the command's stdin
  // How the command ended (its exit status, or the signal that killed it) once the host said so.
  std::optional<ExitStatus> exit();

 private:
  friend class SshSession;
  struct Callbacks;
  SshChannel(ssh_channel_struct* channel, std::string host);
  ssh_channel_struct* channel_;
  std::string host_;
  bool out_ended_ = false, err_ended_ = false;
  std::unique_ptr<Callbacks> callbacks_;
};

class SshSession {
 public:
  // Connects, verifies the host key and authenticates; throws kComm (kTimeout for the connect
  // timeout) naming the host and the reason. A target with a jump host (`via`) is reached through
  // a session to it (verified and authenticated first, the same way, naming it when refused) and
  // a direct-tcpip channel there, which a thread of this session relays.
  SshSession(SshTarget target, const SshConnectOptions& options);
  ~SshSession();
  SshSession(const SshSession&) = delete;
  SshSession& operator=(const SshSession&) = delete;

  const SshTarget& target() const { return target_; }
  const std::string& fingerprint() const { return fingerprint_; }  // "SHA256:..."

  // Starts `command` (already quoted: the remote user's shell reads it).
  std::unique_ptr<SshChannel> start(const std::string& command);
  // Runs `command` to its end, `input` on its stdin; throws kTimeout after `timeout`. Memory is
  // bounded whatever the host sends: output past kMaxCommandOutputBytes is read and dropped.
  CommandResult run(const std::string& command, std::chrono::milliseconds timeout,
                    std::string_view input = {});
  // Writes `content` to `remote_path` by SFTP with permissions `mode` (also when the file was
  // there before).
  void upload(const std::string& remote_path, std::string_view content, int mode);
  // Creates `remote_dir` and the directories above it that are missing, each with `mode`, by SFTP
  // (a relative path is under the remote user's home).
  void makeDirectories(const std::string& remote_dir, int mode);
  // Sends an SSH keepalive (the reply keeps TCP's unacknowledged-data timer quiet); the socket's
  // TCP_USER_TIMEOUT then ends a connection whose host stopped answering.
  void keepalive();

  static std::string libsshVersion();

 private:
  void verifyHostKey(const SshConnectOptions& options);
  void authenticate(const SshConnectOptions& options);
  [[noreturn]] void fail(const std::string& what) const;

  struct Jump;
  void connectThroughJump(const SshConnectOptions& options);

  SshTarget target_;
  std::unique_ptr<Jump> jump_;  // the jump host's session and its relay; null without one
  ssh_session_struct* session_ = nullptr;
  std::string fingerprint_;
};

}  // namespace ringmaster
