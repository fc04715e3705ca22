// SshLauncher: a job on hosts reached over SSH, one `ringmaster-node agent` per host. Every host
// is connected (host key verified first), checked and prepared in parallel on a bounded number
// of threads, however many hosts there are. Each host gets one remote shell (issue 36): it checks
// ringmaster-node's version, writes the spec from its stdin into a private job directory and
// waits; where the version differs, this build is uploaded by SFTP. Once every host is ready,
// node 0's shell becomes the agent and starts the rendezvous store on a free port, and the others'
// become agents against it. Each agent runs in its
// own process group (sshd makes the remote shell a session leader and the agent `exec`s it), so
// cancel and kill reach all of a host's processes from a second channel; a dropped connection
// ends the remote agent, which exits when its stdin closes. A detached run (issue 21) is the
// exception: its agents are started with --detach in their job directories, which are kept, and
// attaching follows each host's spool (`ringmaster-node spool-follow`) over a fresh connection,
// its host key verified as at the launch.
#pragma once

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "launcher/launch.h"
#include "launcher/worker_threads.h"
#include "spec/job_spec.h"
#include "ssh/ssh_session.h"
#include "ssh/ssh_target.h"

namespace ringmaster {

struct SshLaunchOptions {
  std::vector<LaunchHostSpec> hosts;  // the spec's launch.hosts, in node-rank order
  std::string spec_json;              // the job spec every agent and worker reads
  std::string node_binary;            // ringmaster-node's path on the hosts
  std::string local_node_binary;      // this build's, uploaded where the hosts lack it
  bool upload_node_binary = true;     // else a host without the right version is an error
  // Where an uploaded ringmaster-node is kept on the hosts, one directory per version (relative
  // paths start in the remote home).
  std::string remote_cache_dir = ".cache/ringmaster";
  // Where the other hosts reach node 0's rendezvous store; empty: node 0's HostName.
  std::string master_addr;
  std::chrono::milliseconds grace{5000};  // cancel: TERM, then KILL after this
  // Copied by SFTP into each host's job directory before its agent starts (a program job): every
  // regular file under `upload_directory` (the local program.workdir of program.upload; .git and
  // __pycache__ left out) into JOB_DIR/program/, and `upload_package`'s files (the `ringmaster`
  // Python package of this build) into JOB_DIR/python/ringmaster/, where the agent looks first.
  // Empty: nothing. At most kMaxUploadFiles files and kMaxUploadBytes bytes in all.
  std::string upload_directory;
  std::string upload_package;
  std::string ssh_config_path = defaultSshConfigPath();
  SshConnectOptions connect;
  // Detached (ringmaster run --detach): every agent is started with --detach JOB_DIR; the launch
  // ends once each has detached, and the job directories are kept (jobDirs()).
  bool detach = false;
  // The most threads the launch uses at once, whatever the number of hosts (issue 32): hosts are
  // connected and prepared, and their agents started, this many at a time, and each serving
  // thread serves every max_threads-th host in turn.
  std::size_t max_threads = kDefaultWorkerThreads;
  ThreadStarter start_thread;  // empty: std::thread (tests make it fail)
  // Asked from the launch's threads before each host is connected or started (a launch to many
  // silent hosts takes hosts / max_threads connect timeouts): true tries no further host, and
  // the launch fails with kComm "the launch was stopped ...". Empty: never.
  std::function<bool()> stop_requested;
  // Attach to a detached run: nothing is made or uploaded; host i runs `spool-follow
  // follow_dirs[i] --from follow_from` with the ringmaster-node its agent ran, and cancel / kill
  // signal that agent by its PID file. Empty: a launch.
  std::vector<std::string> follow_dirs;
  std::string follow_from;
};

inline constexpr size_t kMaxUploadFiles = 4096;
inline constexpr uint64_t kMaxUploadBytes = uint64_t{512} << 20;

// What a run records per host.
struct SshHostRecord {
  std::string alias, hostname, user;
  int port = 22;
  std::string fingerprint;     // the verified host key, "SHA256:..."
  std::string node_binary;     // the ringmaster-node that ran (after an upload: the cached one)
  bool uploaded = false;       // this launch uploaded it
  std::string command;         // exactly what was started
  std::string libssh_version;  // of this side
};

// `ringmaster-node --version` of this build: the version and telemetry protocol agents must have.
std::string expectedNodeVersion();

class SshLauncher final : public Launch {
 public:
  // Connects to every host, prepares and starts every agent; when any host fails, everything
  // already started is stopped and the error (naming the host and the reason; for several
  // hosts, how many and the first ones') is thrown. A thread the system refuses is kUnavailable.
  explicit SshLauncher(SshLaunchOptions options);
  ~SshLauncher() override;  // kills what still runs and removes the job's files on the hosts

  bool pump(std::chrono::milliseconds timeout, const LaunchSink& sink) override;
  void cancel() override;
  void kill() override;
  ExitStatus wait() override;
  std::string failure() const override;

  const std::vector<SshHostRecord>& hosts() const { return records_; }
  // Each host's job directory, by node rank (kept on the hosts after a detached launch).
  std::vector<std::string> jobDirs() const;

 private:
  struct Host;
  struct Serving;
  // Connects, then starts the host's launch shell (launchCommand) with the spec on its stdin and
  // reads its job directory; installs this build's node where the version differs (installNode)
  // and uploads the program's files. The shell then waits for startAgent.
  void prepare(Host& host);
  // The one remote command of a host: prints the node's version, kJobDirMarker and a fresh
  // private job directory holding the spec (read from stdin), then, where the version is this
  // build's, goes on as agentCommand; else it ends.
  std::string launchCommand(const Host& host) const;
  // With $d the job directory: reads the store's address from stdin, says its process group on
  // stderr and becomes the agent.
  std::string agentCommand(const Host& host) const;
  struct LaunchShellSaid {
    std::string version;   // the node's --version, empty when it is not there or does not run
    std::string out, err;  // what came after the job directory, and on stderr
  };
  // Reads the launch shell's first words into host.job_dir; throws naming the host when the
  // shell could not make the directory.
  LaunchShellSaid readJobDir(Host& host);
  // The node found was `found` (another build's version, or empty): this build's is uploaded into
  // the remote cache where allowed and missing there, and host.node_binary names it.
  void installNode(Host& host, const std::string& found);
  // Sends the launch shell the address of node 0's store (port 0 to node 0 itself: it picks one),
  // so that it becomes the agent; for an attach, starts the host's spool follower instead.
  void startAgent(Host& host, int master_port);
  // Runs `step` for every host from index `first` on, max_threads at a time; a host's failure
  // is kept as its error.
  void forEachHost(size_t first, std::string_view purpose, const std::function<void(Host&)>& step);
  // The launch's error, if any host has one: that host's, or for several hosts a summary.
  std::exception_ptr hostsError() const;
  // A launch that failed: every agent started is killed and the job directories removed.
  void stopAgents();
  // The serving threads, max_threads at most; when one is refused, the hosts are stopped.
  void startServing();
  // Serves hosts first, first + stride, ... in turn, until each one's agent has ended.
  void serveHosts(size_t first, size_t stride);
  // One turn of a host: signals out, keepalive, lines in (waiting at most `read_timeout`);
  // false once it has ended (its exit status or error recorded).
  bool serveTurn(Serving& serving, std::chrono::milliseconds read_timeout);
  // Reads what the host's agent sent (waiting at most `timeout`) and queues it whole-line
  // (classifyAgentLine): the agent's process group is taken from its first stderr line, every
  // other stderr line also goes to `on_log`; false once the agent's output ended.
  bool relayOutput(Host& host, std::chrono::milliseconds timeout,
                   const std::function<void(const std::string&)>& on_log);
  void stopHost(Host& host, int signo);
  // Queues a line for pump(), waiting while kMaxQueuedBytes are queued (backpressure: a recorder
  // that cannot keep up slows the reading of the channels, hence the agents and workers), unless
  // wait() has begun (pump() is not called any more) or the serving threads have not started.
  void pushLine(AgentLine line);
  void cleanUp();

  SshLaunchOptions options_;
  std::vector<std::unique_ptr<Host>> hosts_;
  // The files to copy into each job directory: (path there, relative to it; local path).
  std::vector<std::pair<std::string, std::string>> uploads_;
  void uploadFiles(Host& host);
  std::vector<SshHostRecord> records_;
  std::vector<std::thread> threads_;
  mutable std::mutex mutex_;
  std::condition_variable arrived_, room_;
  std::deque<AgentLine> lines_;
  size_t queued_bytes_ = 0;  // of lines_' texts
  bool waiting_ = false;     // wait() has begun
  int serving_ = 0;
  std::string failure_;
  bool joined_ = false;
  bool following() const { return !options_.follow_dirs.empty(); }
  bool keep_job_dirs_ = false;          // detached, or attached and not ended
  std::atomic<bool> abandoned_{false};  // an attach given up: the serving threads return
};

}  // namespace ringmaster
