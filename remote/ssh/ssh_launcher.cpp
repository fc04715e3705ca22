// The SSH launcher's phases: prepare every host, max_threads at a time (connect, verify,
// authenticate, start its launch shell: the node's version checked and the spec written into a
// fresh job directory, this build uploaded where the version differs), tell node 0's shell to
// become the agent and read the store's port from it, tell the others that port, then serve the
// hosts on at most max_threads threads, each host on one of them (the only one touching that
// host's session) in turn with the others it has: lines in, signals out, keepalives.
#include "ssh/ssh_launcher.h"

#include <csignal>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"
#include "launcher/agent_lines.h"
#include "telemetry/codec.h"
#include "telemetry/events.h"

namespace ringmaster {

namespace {

using Clock = std::chrono::steady_clock;
using namespace std::chrono_literals;
constexpr auto kCommandTimeout = 30s;
constexpr auto kKeepaliveEvery = 5s;
// Output waiting for pump() at most (a line may pass it once): beyond it the serving threads stop
// reading their channels until pump() has taken what is queued.
constexpr size_t kMaxQueuedBytes = size_t{64} << 20;
constexpr std::string_view kPgidPrefix = "ringmaster-pgid ";
constexpr std::string_view kStorePrefix = "rendezvous store on ";
constexpr std::string_view kJobDirMarker = "ringmaster-job-dir";
// What a launch shell may say before its job directory (the node's version, the start-up files'
// noise) at most.
constexpr size_t kMaxLaunchShellBytes = size_t{1} << 20;
// When several hosts fail, the launch's error lists this many of them, then counts the rest.
constexpr size_t kListedHostFailures = 20;

std::string trimmed(std::string text) {
  while (!text.empty() && (text.back() == '\n' || text.back() == '\r' || text.back() == ' '))
    text.pop_back();
  return text;
}

std::string readLocalFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) RM_THROW(kIo, fmt::format("cannot read {}", path));
  std::ostringstream content;
  content << in.rdbuf();
  return content.str();
}

// Every regular file under `directory` (not following directory links; .git and __pycache__
// left out) as (`prefix`/relative path, local path), appended to `files`; refused past the bounds.
void listUploads(const std::string& directory, const std::string& prefix,
                 std::vector<std::pair<std::string, std::string>>& files, uint64_t& bytes) {
  namespace fs = std::filesystem;
  std::error_code error;
  if (!fs::is_directory(directory, error))
    RM_THROW(kIo, fmt::format("cannot upload {}: not a directory", directory));
  fs::recursive_directory_iterator it(directory, error), end;
  if (error) RM_THROW(kIo, fmt::format("cannot upload {}: {}", directory, error.message()));
  for (; it != end; it.increment(error)) {
    if (error) RM_THROW(kIo, fmt::format("cannot upload {}: {}", directory, error.message()));
    const std::string name = it->path().filename().string();
    if (it->is_directory(error) && (name == ".git" || name == "__pycache__")) {
      it.disable_recursion_pending();
      continue;
    }
    if (!it->is_regular_file(error)) continue;
    bytes += it->file_size(error);
    files.emplace_back(prefix + "/" + fs::relative(it->path(), directory).generic_string(),
                       it->path().string());
    if (files.size() > kMaxUploadFiles || bytes > kMaxUploadBytes) {
      RM_THROW(kInvalidArgument,
               fmt::format("cannot upload {}: more than {} files or {} MiB (program.upload copies "
                           "the whole workdir to every host; point program.workdir at the "
                           "script's own folder)",
                           directory, kMaxUploadFiles, kMaxUploadBytes >> 20));
    }
  }
}

}  // namespace

std::string expectedNodeVersion() {
  return fmt::format("ringmaster-node {} (telemetry protocol {})", kRingmasterVersion,
                     RINGMASTER_TELEMETRY_PROTOCOL);
}

struct SshLauncher::Host {
  int node_rank = 0;
  LaunchHostSpec spec;
  SshTarget target;
  std::unique_ptr<SshSession> session;
  std::unique_ptr<SshChannel> agent;
  std::string node_binary, job_dir, command;
  bool uploaded = false;
  long pgid = 0;  // the agent's process group on the host, 0 until it said
  LineSplitter out, err{64 * 1024};
  std::atomic<int> stop_signal{0};  // asked for: SIGTERM or SIGKILL
  ExitStatus exit;
  std::exception_ptr error;  // preparing, starting or serving failed
};

SshLauncher::SshLauncher(SshLaunchOptions options) : options_(std::move(options)) {
  RM_CHECK_ARG(!options_.hosts.empty(), "launch.hosts is empty");
  keep_job_dirs_ = following();  // a failed attach leaves the detached job as it is
  uint64_t upload_bytes = 0;
  if (!options_.upload_directory.empty())
    listUploads(options_.upload_directory, "program", uploads_, upload_bytes);
  if (!options_.upload_package.empty())
    listUploads(options_.upload_package, "python/ringmaster", uploads_, upload_bytes);
  for (size_t i = 0; i < options_.hosts.size(); ++i) {
    auto host = std::make_unique<Host>();
    host->node_rank = static_cast<int>(i);
    host->spec = options_.hosts[i];
    hosts_.push_back(std::move(host));
  }
  // Every host connected and prepared, max_threads at a time: the slowest hosts set the time,
  // not the sum, and a launch to thousands of hosts holds a fixed number of threads.
  try {
    forEachHost(0, "to connect to the hosts", [this](Host& host) { prepare(host); });
  } catch (...) {
    cleanUp();
    throw;
  }
  if (auto error = hostsError()) {
    cleanUp();
    std::rethrow_exception(error);
  }

  // Node 0 hosts the store on a port it picks; the others need that port (not when following
  // detached agents, which run already).
  Host& first = *hosts_[0];
  int master_port = following() ? -1 : 0;
  std::vector<std::string> first_said;  // the agent's last words, should it end at once
  try {
    if (!following()) startAgent(first, 0);
    const auto deadline = Clock::now() + options_.connect.connect_timeout + kCommandTimeout;
    while (master_port == 0) {
      const bool open = relayOutput(first, 50ms, [&](const std::string& line) {
        if (const auto at = line.find(kStorePrefix); at != std::string::npos) {
          const std::string address = line.substr(at + kStorePrefix.size());
          master_port = std::stoi(address.substr(address.rfind(':') + 1));
        }
        first_said.push_back(line);
        if (first_said.size() > 5) first_said.erase(first_said.begin());
      });
      // The agent may print its store's address and end in the same read (a job whose workers
      // end at once): that is a start, and the job's end is served as any other.
      if (!open && master_port == 0) {
        RM_THROW(kComm,
                 fmt::format("{}: the node agent ended before its rendezvous store started (it "
                             "ended with {}): {}",
                             describeTarget(first.target),
                             first.agent->exit().value_or(ExitStatus{.exit_code = -1}).describe(),
                             fmt::join(first_said, " / ")));
      }
      if (Clock::now() > deadline) {
        RM_THROW(kTimeout, fmt::format("{}: the node agent did not start its rendezvous "
                                       "store in time",
                                       describeTarget(first.target)));
      }
    }
  } catch (...) {
    first.error = std::current_exception();
    stopAgents();
    std::rethrow_exception(first.error);
  }
  try {
    forEachHost(following() ? 0 : 1, "to start the agents",
                [this, master_port](Host& host) { startAgent(host, master_port); });
  } catch (...) {
    stopAgents();
    throw;
  }
  if (auto error = hostsError()) {
    stopAgents();
    std::rethrow_exception(error);
  }

  for (auto& host : hosts_) {
    records_.push_back({.alias = host->target.alias,
                        .hostname = host->target.hostname,
                        .user = host->target.user,
                        .port = host->target.port,
                        .fingerprint = host->session->fingerprint(),
                        .node_binary = host->node_binary,
                        .uploaded = host->uploaded,
                        .command = host->command,
                        .libssh_version = SshSession::libsshVersion()});
  }
  startServing();
}

SshLauncher::~SshLauncher() {
  if (!joined_) {
    // A detached job goes on when an attach is given up: its followers are just left.
    if (following())
      abandoned_ = true;
    else
      kill();
    wait();
  }
}

std::vector<std::string> SshLauncher::jobDirs() const {
  std::vector<std::string> dirs;
  for (const auto& host : hosts_) dirs.push_back(host->job_dir);
  return dirs;
}

void SshLauncher::stopAgents() {
  for (auto& host : hosts_) {
    if (!host->agent) continue;
    try {
      stopHost(*host, SIGKILL);
    } catch (const std::exception&) {
    }
  }
  cleanUp();
}

void SshLauncher::startServing() {
  serving_ = static_cast<int>(hosts_.size());
  const size_t servers = std::min(hosts_.size(), std::max<size_t>(options_.max_threads, 1));
  // Stops what the started serving threads serve, so that they end and can be joined.
  auto stopServing = [this] {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      waiting_ = true;  // nothing will pump: pushLine must not wait for room
    }
    room_.notify_all();
    if (following())
      abandoned_ = true;  // an attach given up leaves the detached job as it is
    else
      kill();
  };
  try {
    startThreads(
        servers, [this, servers](size_t first) { serveHosts(first, servers); }, threads_,
        "to serve the hosts", stopServing, options_.start_thread);
  } catch (...) {
    // The hosts no thread served are stopped here.
    if (following())
      cleanUp();
    else
      stopAgents();
    throw;
  }
}

void SshLauncher::forEachHost(size_t first, std::string_view purpose,
                              const std::function<void(Host&)>& step) {
  if (first >= hosts_.size()) return;
  const auto stopped = [this] { return options_.stop_requested && options_.stop_requested(); };
  std::atomic<size_t> done{0};
  runOnWorkers(
      hosts_.size() - first, options_.max_threads,
      [&](size_t i) {
        if (stopped()) return;
        Host& host = *hosts_[first + i];
        try {
          step(host);
        } catch (...) {
          host.error = std::current_exception();
        }
        ++done;
      },
      purpose, options_.start_thread);
  if (done < hosts_.size() - first && stopped()) {
    RM_THROW(kComm, fmt::format("the launch was stopped on request before every host was "
                                "tried ({} of {})",
                                done.load(), hosts_.size() - first));
  }
}

std::exception_ptr SshLauncher::hostsError() const {
  std::vector<const Host*> failed;
  for (const auto& host : hosts_)
    if (host->error) failed.push_back(host.get());
  if (failed.size() <= 1) return failed.empty() ? nullptr : failed[0]->error;
  // Several hosts: how many, and the first ones' reasons, with the first one's kind.
  ErrorKind kind = ErrorKind::kComm;
  std::string reasons;
  for (size_t i = 0; i < failed.size() && i < kListedHostFailures; ++i) {
    try {
      std::rethrow_exception(failed[i]->error);
    } catch (const Error& e) {
      if (i == 0) kind = e.kind();
      reasons += fmt::format("\n  {}", e.message());
    } catch (const std::exception& e) {
      reasons += fmt::format("\n  {}", e.what());
    }
  }
  if (failed.size() > kListedHostFailures)
    reasons += fmt::format("\n  ... and {} more", failed.size() - kListedHostFailures);
  return std::make_exception_ptr(
      Error(kind, fmt::format("{} of {} hosts failed:{}", failed.size(), hosts_.size(), reasons),
            __FILE__, __LINE__));
}

void SshLauncher::prepare(Host& host) {
  host.target = resolveSshTarget(host.spec, options_.ssh_config_path);
  host.session = std::make_unique<SshSession>(host.target, options_.connect);
  if (following()) {
    RM_CHECK_ARG(options_.follow_dirs.size() == hosts_.size(),
                 "attach: one job directory per host");
    host.job_dir = options_.follow_dirs[static_cast<size_t>(host.node_rank)];
    return;
  }
  // One remote shell checks the node, writes the spec and waits to become the agent: the host's
  // shell start-up (a login's start-up files can take most of a second) is paid once.
  host.node_binary = options_.node_binary;
  host.command = launchCommand(host);
  host.agent = host.session->start(host.command);
  host.agent->write(options_.spec_json);
  LaunchShellSaid said = readJobDir(host);
  if (said.version != expectedNodeVersion()) {
    host.agent.reset();  // that shell has ended: the node there is another build, or none
    installNode(host, said.version);
    // The installed node's shell: the job directory is there already.
    host.command = fmt::format("d={}; {}", shellQuote(host.job_dir), agentCommand(host));
    host.agent = host.session->start(host.command);
  } else {
    host.out.feed(said.out);
    host.err.feed(said.err);
  }
  uploadFiles(host);
}

std::string SshLauncher::launchCommand(const Host& host) const {
  // The spec comes on stdin, exactly its size of it (head), never on the command line; the
  // version is compared by the shell as by readJobDir's caller, byte for byte.
  return fmt::format(
      "v=$({node} --version 2>/dev/null); printf '%s\\n{marker}\\n' \"$v\"; m=$(umask); "
      "umask 077 && d=$(mktemp -d \"${{TMPDIR:-/tmp}}/ringmaster-job.XXXXXX\") && "
      "head -c {bytes} > \"$d/spec.json\" && umask \"$m\" && echo \"$d\" || exit 1; "
      "[ \"$v\" = {expected} ] || exit 0; {agent}",
      fmt::arg("node", shellQuote(host.node_binary)), fmt::arg("marker", kJobDirMarker),
      fmt::arg("bytes", options_.spec_json.size()),
      fmt::arg("expected", shellQuote(expectedNodeVersion())),
      fmt::arg("agent", agentCommand(host)));
}

std::string SshLauncher::agentCommand(const Host& host) const {
  // sshd runs the command's shell as a session leader; `exec` keeps its pid, so the agent's
  // process group id is the shell's $$, said first on stderr. The store's address is one word
  // however it reads ("$master").
  std::string command = fmt::format(
      "IFS= read -r master && echo {}$$ >&2 && exec {} --spec \"$d/spec.json\" {} --master "
      "\"$master\" {}",
      kPgidPrefix, shellCommand({host.node_binary, "agent"}),
      shellCommand({"--node-rank", std::to_string(host.node_rank), "--nnodes",
                    std::to_string(hosts_.size())}),
      shellCommand({"--grace", fmt::format("{:.3f}", options_.grace.count() / 1000.0)}));
  if (options_.detach) command += " --detach \"$d\"";
  return command;
}

SshLauncher::LaunchShellSaid SshLauncher::readJobDir(Host& host) {
  const std::string alias = describeTarget(host.target);
  const std::string marker = fmt::format("\n{}\n", kJobDirMarker);
  std::string out, err;
  size_t at = std::string::npos, end = std::string::npos;
  const auto deadline = Clock::now() + kCommandTimeout;
  for (;;) {
    const bool open = host.agent->read(out, err, 50ms);
    at = out.find(marker);
    end = at == std::string::npos ? at : out.find('\n', at + marker.size());
    if (end != std::string::npos || !open) break;
    if (out.size() + err.size() > kMaxLaunchShellBytes)
      RM_THROW(kIo, fmt::format("{}: the launch shell said more than {} bytes before its job "
                                "directory (is {} ringmaster-node?)",
                                alias, kMaxLaunchShellBytes, host.node_binary));
    if (Clock::now() > deadline)
      RM_THROW(kTimeout,
               fmt::format("{}: no job directory within {} ms (the launch shell: {})", alias,
                           std::chrono::milliseconds(kCommandTimeout).count(), trimmed(err)));
  }
  const size_t begin = at + marker.size();
  host.job_dir = end == std::string::npos ? std::string() : out.substr(begin, end - begin);
  if (host.job_dir.empty() || host.job_dir[0] != '/')
    RM_THROW(kIo, fmt::format("{}: cannot create a job directory: {}", alias, err));
  return {.version = out.substr(0, at), .out = out.substr(end + 1), .err = std::move(err)};
}

void SshLauncher::installNode(Host& host, const std::string& found) {
  const std::string alias = describeTarget(host.target);
  const std::string expected = expectedNodeVersion();
  SshSession& session = *host.session;
  auto versionOf = [&](const std::string& binary) {
    CommandResult ran = session.run(shellCommand({binary, "--version"}), kCommandTimeout);
    return ran.exit_status == 0 ? trimmed(ran.out) : std::string();
  };
  const std::string why =
      found.empty() ? fmt::format("{} is not there or does not run", host.node_binary)
                    : fmt::format("{} is '{}', not '{}'", host.node_binary, found, expected);
  if (!options_.upload_node_binary || options_.local_node_binary.empty()) {
    RM_THROW(kUnavailable, fmt::format("{}: {}; install this build's ringmaster-node "
                                       "there or allow the upload",
                                       alias, why));
  }
  // A per-version cache under the remote home: later launches of this build find it there.
  const std::string dir = fmt::format("{}/node-{}-protocol{}", options_.remote_cache_dir,
                                      kRingmasterVersion, RINGMASTER_TELEMETRY_PROTOCOL);
  const std::string cached = dir + "/ringmaster-node";
  if (versionOf(cached) != expected) {
    CommandResult made = session.run("mkdir -p -m 700 " + shellQuote(dir), kCommandTimeout);
    if (made.exit_status != 0)
      RM_THROW(kIo, fmt::format("{}: cannot create {}: {}", alias, dir, made.err));
    session.upload(cached + ".partial", readLocalFile(options_.local_node_binary), 0755);
    CommandResult moved =
        session.run(shellCommand({"mv", "-f", cached + ".partial", cached}), kCommandTimeout);
    if (moved.exit_status != 0)
      RM_THROW(kIo, fmt::format("{}: cannot install {}: {}", alias, cached, moved.err));
    const std::string uploaded = versionOf(cached);
    if (uploaded != expected) {
      RM_THROW(kUnavailable, fmt::format("{}: {}, and the uploaded build does not run there ({})",
                                         alias, why, uploaded.empty() ? "no version" : uploaded));
    }
    host.uploaded = true;
  }
  host.node_binary = cached;
}

void SshLauncher::uploadFiles(Host& host) {
  if (uploads_.empty()) return;
  std::set<std::string> directories;
  for (const auto& [remote, local] : uploads_) {
    for (std::filesystem::path dir = std::filesystem::path(remote).parent_path(); !dir.empty();
         dir = dir.parent_path()) {
      directories.insert(host.job_dir + "/" + dir.generic_string());
    }
  }
  std::vector<std::string> mkdir = {"mkdir", "-p", "-m", "700", "--"};
  mkdir.insert(mkdir.end(), directories.begin(), directories.end());
  const CommandResult made = host.session->run(shellCommand(mkdir), kCommandTimeout);
  const std::string alias = describeTarget(host.target);
  if (made.exit_status != 0)
    RM_THROW(kIo, fmt::format("{}: cannot make the program's directories: {}", alias, made.err));
  for (const auto& [remote, local] : uploads_) {
    std::error_code error;
    const auto permissions = std::filesystem::status(local, error).permissions();
    const bool executable =
        (permissions & std::filesystem::perms::owner_exec) != std::filesystem::perms::none;
    host.session->upload(host.job_dir + "/" + remote, readLocalFile(local),
                         executable ? 0700 : 0600);
  }
}

void SshLauncher::startAgent(Host& host, int master_port) {
  if (following()) {
    // The ringmaster-node the detached agent ran, as it wrote it in its job directory.
    host.node_binary = "$(cat " + shellQuote(host.job_dir + "/node-binary") + ")";
    host.command =
        fmt::format("echo {}$$ >&2; exec \"{}\" {}", kPgidPrefix, host.node_binary,
                    shellCommand({"spool-follow", host.job_dir, "--from", options_.follow_from}));
    host.agent = host.session->start(host.command);
    return;
  }
  // The host's launch shell waits for this line (agentCommand) and becomes the agent.
  std::string master =
      options_.master_addr.empty() ? hosts_[0]->target.hostname : options_.master_addr;
  if (master.find(':') != std::string::npos) master = "[" + master + "]";
  RM_CHECK_ARG(master.find_first_of("\r\n") == std::string::npos,
               fmt::format("the store's address '{}' holds a line break", master));
  host.agent->write(fmt::format("{}:{}\n", master, master_port));
}

void SshLauncher::pushLine(AgentLine line) {
  {
    std::unique_lock<std::mutex> lock(mutex_);
    // Before the serving threads start (serving_ 0) the constructor reads node 0 itself.
    room_.wait(lock, [&] { return queued_bytes_ < kMaxQueuedBytes || waiting_ || serving_ == 0; });
    queued_bytes_ += line.text.size();
    lines_.push_back(std::move(line));
  }
  arrived_.notify_one();
}

void SshLauncher::stopHost(Host& host, int signo) {
  if (following()) {
    // The detached agent, by its PID file: TERM is forwarded to its workers, a second TERM
    // kills them (the follower ends with the agent).
    host.session->run("kill -TERM -- \"$(cat " + shellQuote(host.job_dir + "/agent.pid") + ")\"",
                      kCommandTimeout);
    return;
  }
  if (options_.detach && !host.job_dir.empty()) {
    // A detached launch stopped before it ended (cancelled, or another host failed): the agent
    // that already detached is out of the channel's process group, and is stopped by its PID.
    host.session->run("p=$(cat " + shellQuote(host.job_dir + "/agent.pid") +
                          " 2>/dev/null) && kill -TERM -- \"$p\"",
                      kCommandTimeout);
  }
  if (host.pgid <= 0) {  // not known yet: the end of its stdin stops the agent as well
    host.agent->closeInput();
    return;
  }
  if (signo == SIGKILL) {
    // The workers lead process groups of their own in the agent's session (sshd's setsid: its id
    // is the group's): the session, whole, where pkill is installed.
    host.session->run(fmt::format("kill -KILL -- -{0}; pkill -KILL -s {0} 2>/dev/null", host.pgid),
                      kCommandTimeout);
    return;
  }
  host.session->run(fmt::format("kill -TERM -- -{}", host.pgid), kCommandTimeout);
}

bool SshLauncher::relayOutput(Host& host, std::chrono::milliseconds timeout,
                              const std::function<void(const std::string&)>& on_log) {
  std::string out, err;
  const bool open = host.agent->read(out, err, timeout);
  host.out.feed(out);
  host.err.feed(err);
  if (!open) {
    host.out.finish();
    host.err.finish();
  }
  while (auto line = host.err.next()) {
    if (host.pgid == 0 && line->text.rfind(kPgidPrefix, 0) == 0) {
      host.pgid = std::stol(line->text.substr(kPgidPrefix.size()));
      continue;
    }
    AgentLine classified = classifyAgentLine(false, std::move(*line), host.err.maxLineBytes(),
                                             describeTarget(host.target));
    on_log(classified.text);
    pushLine(std::move(classified));
  }
  while (auto line = host.out.next()) {
    pushLine(classifyAgentLine(true, std::move(*line), host.out.maxLineBytes(),
                               describeTarget(host.target)));
  }
  return open;
}

struct SshLauncher::Serving {
  Host* host;
  int sent = 0;  // the signal last sent
  Clock::time_point term_sent{}, last_keepalive = Clock::now();
};

void SshLauncher::serveHosts(size_t first, size_t stride) {
  std::vector<Serving> serving;
  for (size_t i = first; i < hosts_.size(); i += stride)
    serving.push_back({.host = hosts_[i].get()});
  while (!serving.empty()) {
    // Each host read once a turn, the turn waiting about 50 ms in all when nothing comes.
    const auto read_timeout =
        std::max<std::chrono::milliseconds>(1ms, 50ms / static_cast<int>(serving.size()));
    for (size_t i = 0; i < serving.size();) {
      if (serveTurn(serving[i], read_timeout)) {
        ++i;
      } else {
        serving.erase(serving.begin() + static_cast<std::ptrdiff_t>(i));
      }
    }
  }
}

bool SshLauncher::serveTurn(Serving& serving, std::chrono::milliseconds read_timeout) {
  Host& host = *serving.host;
  try {
    // Nothing, then SIGTERM, then SIGKILL (whose number is the smaller: compared by order).
    const int wanted = host.stop_signal.load();
    if (wanted != serving.sent && serving.sent != SIGKILL && wanted != 0) {
      stopHost(host, wanted);
      serving.sent = wanted;
      serving.term_sent = Clock::now();
    }
    if (abandoned_) {
      host.exit = ExitStatus{.exit_code = 129};  // left as it is
    } else {
      if (serving.sent == SIGTERM && Clock::now() - serving.term_sent > options_.grace + 2s) {
        stopHost(host, SIGKILL);
        serving.sent = SIGKILL;
      }
      if (Clock::now() - serving.last_keepalive > kKeepaliveEvery) {
        host.session->keepalive();
        serving.last_keepalive = Clock::now();
      }
      if (relayOutput(host, read_timeout, [](const std::string&) {})) return true;
      if (std::optional<ExitStatus> ended = host.agent->exit()) {
        host.exit = *ended;
      } else if (serving.sent != 0) {
        host.exit = ExitStatus{.exit_code = 0, .signal = serving.sent};  // it went as asked
      } else {
        RM_THROW(kComm, fmt::format("{}: the agent's channel closed without an exit status",
                                    describeTarget(host.target)));
      }
    }
  } catch (const std::exception& e) {
    host.error = std::current_exception();
    host.exit = ExitStatus{.exit_code = 255, .signal = 0};
    pushLine({.kind = AgentLine::Kind::kLog, .text = fmt::format("[launcher] {}", e.what())});
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (failure_.empty()) failure_ = e.what();
    }
    // The job cannot go on without this host: the others are stopped.
    for (auto& other : hosts_) {
      int none = 0;
      other->stop_signal.compare_exchange_strong(none, SIGTERM);
    }
  }
  {
    std::lock_guard<std::mutex> lock(mutex_);
    --serving_;
  }
  arrived_.notify_all();
  return false;
}

bool SshLauncher::pump(std::chrono::milliseconds timeout, const LaunchSink& sink) {
  std::deque<AgentLine> lines;
  bool serving;
  {
    std::unique_lock<std::mutex> lock(mutex_);
    arrived_.wait_for(lock, timeout, [&] { return !lines_.empty() || serving_ == 0; });
    lines.swap(lines_);
    queued_bytes_ = 0;
    serving = serving_ > 0;
  }
  room_.notify_all();
  for (const AgentLine& line : lines) deliverAgentLine(line, sink);
  return serving || !lines.empty();
}

void SshLauncher::cancel() {
  for (auto& host : hosts_) {
    int none = 0;
    host->stop_signal.compare_exchange_strong(none, SIGTERM);
  }
}

void SshLauncher::kill() {
  for (auto& host : hosts_) host->stop_signal.store(SIGKILL);
}

ExitStatus SshLauncher::wait() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    waiting_ = true;
  }
  room_.notify_all();
  if (!joined_) {
    for (auto& thread : threads_) thread.join();
    joined_ = true;
    // A detached job's directories stay while it runs: after a detached launch, and after an
    // attach that did not see the job end.
    bool all_ok = true, any_error = false;
    for (auto& host : hosts_) {
      all_ok = all_ok && host->exit.ok();
      any_error = any_error || host->error != nullptr;
    }
    keep_job_dirs_ = (options_.detach && all_ok) || (following() && (any_error || abandoned_));
    cleanUp();
  }
  for (auto& host : hosts_)
    if (!host->exit.ok()) return host->exit;
  return {};
}

std::string SshLauncher::failure() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return failure_;
}

void SshLauncher::cleanUp() {
  for (auto& host : hosts_) {
    host->agent.reset();
    if (!host->session || host->job_dir.empty() || keep_job_dirs_) continue;
    try {
      host->session->run(shellCommand({"rm", "-rf", "--", host->job_dir}), 10s);
    } catch (const std::exception&) {
      // The connection is gone: the directory is left in the host's temporary directory.
    }
    host->job_dir.clear();
  }
}

}  // namespace ringmaster
