// A real Slurm cluster for tests (issue 35), from Debian's packages (munge, slurmctld, slurmd,
// slurm-client): one munged, one slurmctld and N slurmd on this machine, every file in a fresh
// directory under /tmp, started in a few seconds and stopped by PID, with every slurmstepd its jobs
// left. No slurmdbd: `sacct -c` reads the jobcomp/filetxt file, which holds final states only.
//
// Facts this relies on (Slurm 22.05.8, munge 0.5.15, Debian 12, measured here):
// - Several `slurmd -N NAME` run on one host, each with its own Port= on its NodeName line
//   (NodeAddr=127.0.0.1, NodeHostname=`hostname -s`), and make a real multi-node cluster;
//   SlurmctldHost must be `hostname -s`; written `NAME(127.0.0.1)` it works where NAME does not
//   resolve (checked with `unshare -u` and an unknown hostname). Per-node files use %n
//   (SlurmdSpoolDir, SlurmdPidFile). All nodes share the hostname: jobs tell them apart by
//   SLURMD_NODENAME.
// - munged with a generated key and its own socket (AuthInfo=socket=...), SlurmUser=root,
//   ProctrackType=proctrack/linuxproc, TaskPlugin=task/none and MpiDefault=none work without
//   cgroups or systemd. SlurmdParameters=config_overrides lets a node have more CPUs than the
//   machine (CI has 2 cores).
// - Start-up (munged, slurmctld, 2 slurmd until `sinfo` shows every node idle) takes about 1.5 s.
// - `slurmctld -D` and `slurmd -D` copy their log to stderr: each daemon's stdout and stderr go
//   to log/NAME.out (start-up errors such as a bad slurm.conf appear only there).
// - `squeue --json` works (openapi v0.0.38): job_state, state_reason ("Resources" for a job
//   waiting behind one that holds every node, "Priority" behind that one). A job asking for more
//   than the partition has is accepted and pends (PartitionConfig), not refused.
// - Killing a slurmd (SIGKILL) leaves its slurmstepd processes and their tasks running, reparented
//   to PID 1 (which does not reap here: they stay zombies once killed). Their /proc/PID/environ
//   holds SLURM_CONF=<this cluster's slurm.conf> (slurmd sets it; the job's tasks inherit it):
//   that is how teardown finds them.
// - A killed slurmd's node is set DOWN once slurmctld's pings fail, and a job that had a step
//   running there ends NODE_FAIL (with --no-requeue; without it the job is requeued). A slurmd
//   killed before the job's step started on it gives FAILED (srun exits 233) instead. Slurm's
//   defaults (SlurmdTimeout=300, MessageTimeout=10) make that minutes: with SlurmdTimeout=5 it
//   takes about 25 s, with {.slurmd_timeout_s = 3, .message_timeout_s = 3} about 5-8 s from
//   killSlurmd to `sacct -c` showing NODE_FAIL. restartSlurmd brings the node back idle at once
//   (ReturnToService=2). Time limits are checked about every 30 s (a 1-minute job ends TIMEOUT
//   at 74-86 s).
// - Finished jobs stay in squeue for MinJobAge seconds (default 300), then only `sacct -c` knows
//   them.
//
// The daemons are children of the thread that built the cluster and die with it (PR_SET_PDEATHSIG),
// so build it on the test's own thread. Client commands run through command() (or a child
// process given env()) in dir(), so a job without --output writes its slurm-ID.out there.
//
// Use: SlurmClusterTest (a fixture that skips without Slurm), or
//   if (auto why = slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
//   SlurmCluster cluster({.nodes = 2});
//   auto id = cluster.sbatch({"-N2", "--wrap", "srun hostname"});
//   cluster.waitForSacct(id, std::chrono::seconds(60));  // "ID|COMPLETED|0:0|n[1-2]"
#pragma once

#include <arpa/inet.h>
#include <gtest/gtest.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "common/proc_files.h"
#include "process/child_process.h"

namespace ringmaster::testing {

inline constexpr const char* kSlurmctld = "/usr/sbin/slurmctld";
inline constexpr const char* kSlurmd = "/usr/sbin/slurmd";
inline constexpr const char* kMunged = "/usr/sbin/munged";
inline constexpr const char* kSlurmClientDir = "/usr/bin";  // sbatch, squeue, sacct, ...

// Why a Slurm test cluster cannot start here, or "" when it can.
inline std::string slurmUnavailable() {
  const std::string install =
      " (apt-get install munge slurmctld slurmd slurm-client, or scripts/install-deps.sh)";
  for (const char* program : {kMunged, kSlurmctld, kSlurmd})
    if (!std::filesystem::exists(program)) return std::string("no ") + program + install;
  for (const char* client : {"sbatch", "squeue", "sinfo", "sacct", "scancel", "scontrol"}) {
    const std::string path = std::string(kSlurmClientDir) + "/" + client;
    if (!std::filesystem::exists(path)) return "no " + path + install;
  }
  if (::geteuid() != 0) return "the Slurm test cluster runs its daemons as root (SlurmUser=root)";
  return "";
}

struct SlurmClusterOptions {
  int nodes = 2;                         // n1 .. nN, all in partition "debug" (Default=YES)
  int cpus_per_node = 2;                 // CPUs= of every node (may exceed the machine's)
  int real_memory_mb = 1000;             // RealMemory= of every node
  std::string max_time = "INFINITE";     // MaxTime= of the partitions ("5": 5 minutes)
  int min_job_age_s = 300;               // MinJobAge: how long a finished job stays in squeue
  int slurmd_timeout_s = 300;            // SlurmdTimeout: a silent slurmd's node goes DOWN after it
  int message_timeout_s = 10;            // MessageTimeout: how long an RPC waits for its answer
  std::string extra_partition;           // "": none; else a second partition of every node
  std::vector<std::string> extra_conf;   // lines appended to slurm.conf
  std::chrono::seconds start_limit{30};  // until every node is idle, else the constructor throws
};

// What a client command (sbatch, squeue, ...) run against the cluster gave.
struct SlurmCommandResult {
  ExitStatus status;
  std::string out, err;
  bool ok() const { return status.ok(); }
};

class SlurmCluster {
 public:
  // Starts the cluster; throws std::runtime_error with the daemons' log tails when it does not
  // come up within options.start_limit (retrying with other ports when a port was taken).
  explicit SlurmCluster(SlurmClusterOptions options = {}) : options_(std::move(options)) {
    char pattern[] = "/tmp/rm-slurm-XXXXXX";  // short: the spool and munge hold Unix sockets
    if (::mkdtemp(pattern) == nullptr) throw std::runtime_error("mkdtemp failed");
    dir_ = pattern;
    for (int n = 1; n <= options_.nodes; ++n) node_names_.push_back("n" + std::to_string(n));
    try {
      startMunge();
      startSlurm();
    } catch (...) {
      stop();
      throw;
    }
  }
  ~SlurmCluster() { stop(); }
  SlurmCluster(const SlurmCluster&) = delete;
  SlurmCluster& operator=(const SlurmCluster&) = delete;

  const std::filesystem::path& dir() const { return dir_; }
  std::filesystem::path conf() const { return dir_ / "slurm.conf"; }
  // The environment a child process needs to reach this cluster: {"SLURM_CONF": conf()}.
  std::map<std::string, std::string> env() const { return {{"SLURM_CONF", conf().string()}}; }
  // Sets SLURM_CONF in this test process's own environment (for code under test that runs the
  // client commands itself); the destructor puts back what was there. Not thread-safe (setenv).
  void exportConf() {
    if (!exported_) {
      const char* previous = std::getenv("SLURM_CONF");
      previous_conf_ = previous ? std::optional<std::string>(previous) : std::nullopt;
      exported_ = true;
    }
    ::setenv("SLURM_CONF", conf().c_str(), 1);
  }
  const std::vector<std::string>& nodeNames() const { return node_names_; }
  int slurmctldPort() const { return ctld_port_; }
  const std::string& firstJobId() const { return first_job_id_; }

  // Runs a client program (sbatch, squeue, sinfo, sacct, scancel, scontrol) against this cluster,
  // in dir(): a job submitted without --output or --chdir writes its slurm-ID.out there.
  SlurmCommandResult command(const std::string& program, const std::vector<std::string>& args,
                             std::chrono::milliseconds limit = std::chrono::seconds(30)) const {
    ChildOptions o;
    o.argv = {std::string(kSlurmClientDir) + "/" + program};
    o.argv.insert(o.argv.end(), args.begin(), args.end());
    o.environment = env();
    o.working_directory = dir_.string();
    ChildProcess child(o);
    std::string out, err;
    const ExitStatus status = readUntilExit(child, out, err, limit);
    return {status, out, err};
  }
  // `sbatch --parsable ARGS...`: the job id; throws with sbatch's stderr when it refuses.
  std::string sbatch(const std::vector<std::string>& args) const {
    std::vector<std::string> all = {"--parsable"};
    all.insert(all.end(), args.begin(), args.end());
    const SlurmCommandResult result = command("sbatch", all);
    std::string id = result.out.substr(0, result.out.find_first_of(";\n"));
    if (!result.ok() || id.empty())
      throw std::runtime_error("sbatch " + result.status.describe() + ": " + result.err);
    return id;
  }
  std::string sinfo(const std::vector<std::string>& args = {}) const {
    return command("sinfo", args).out;
  }
  std::string squeue(const std::vector<std::string>& args = {}) const {
    return command("squeue", args).out;
  }
  // `sacct -c -j ID -P -n -o JobID,State,ExitCode,NodeList`'s line for the job itself
  // ("4242|COMPLETED|0:0|n[1-2]"), or "" while the job has not ended.
  std::string sacctLine(const std::string& job_id) const {
    std::istringstream lines(
        command("sacct", {"-c", "-j", job_id, "-P", "-n", "-o", "JobID,State,ExitCode,NodeList"})
            .out);
    for (std::string line; std::getline(lines, line);)
      if (line.rfind(job_id + "|", 0) == 0) return line;
    return "";
  }
  // Waits (bounded) until the job has ended; its sacctLine, or "" when it did not end in time.
  std::string waitForSacct(const std::string& job_id, std::chrono::milliseconds limit) const {
    return pollUntil(limit, [&] { return sacctLine(job_id); });
  }
  // Every node's state as `sinfo -N` shows it ("idle", "alloc", "down*", ...).
  std::map<std::string, std::string> nodeStates() const {
    std::map<std::string, std::string> states;
    std::istringstream lines(sinfo({"-h", "-N", "-o", "%N %t"}));
    for (std::string node, state; lines >> node >> state;) states[node] = state;
    return states;
  }
  // Waits (bounded) until sinfo shows every node idle; whether it did.
  bool waitIdle(std::chrono::milliseconds limit) const {
    return !pollUntil(limit, [&] {
              return allIdle() ? std::string("idle") : std::string();
            }).empty();
  }

  // SIGKILLs node's slurmd by its PID and reaps it (its slurmstepd processes go on running, as on
  // a real node whose slurmd died; teardown stops them).
  void killSlurmd(const std::string& node) {
    auto found = slurmds_.find(node);
    if (found == slurmds_.end()) throw std::runtime_error("no slurmd runs for node " + node);
    found->second->signal(SIGKILL);
    found->second->wait();
    slurmds_.erase(found);
  }
  // Starts node's slurmd again after killSlurmd (ReturnToService=2 brings a DOWN node back).
  void restartSlurmd(const std::string& node) {
    if (slurmds_.count(node) == 0) slurmds_[node] = startSlurmd(node);
  }

  // The PIDs of the daemons running now: munged, slurmctld, each slurmd.
  std::vector<pid_t> daemonPids() const {
    std::vector<pid_t> pids;
    for (const auto* daemon : {munged_.get(), slurmctld_.get()})
      if (daemon) pids.push_back(daemon->pid());
    for (const auto& [node, slurmd] : slurmds_) pids.push_back(slurmd->pid());
    return pids;
  }
  // Every process of this cluster now: the daemons, the processes whose environment names this
  // cluster's slurm.conf (its slurmstepd processes, the jobs' tasks), and their descendants; never
  // this test process nor what it started itself.
  std::vector<pid_t> processes() const {
    std::vector<pid_t> roots = daemonPids();
    const std::string nul(1, '\0');
    const std::string marker = nul + "SLURM_CONF=" + conf().string() + nul;
    const std::map<pid_t, pid_t> parents = parentMap();
    for (const auto& [pid, ppid] : parents) {
      if (!descendsFrom(pid, ::getpid(), parents) &&
          (nul + readProcFile(pid, "environ")).find(marker) != std::string::npos)
        roots.push_back(pid);
    }
    std::set<pid_t> all(roots.begin(), roots.end());
    for (const auto& [pid, ppid] : parents)
      for (const pid_t root : roots)
        if (descendsFrom(pid, root, parents)) all.insert(pid);
    std::vector<pid_t> running;
    for (const pid_t pid : all)
      if (processRuns(pid)) running.push_back(pid);
    return running;
  }
  // The last lines of every daemon's log and output, for failure messages.
  std::string logTails(size_t lines_each = 20) const {
    std::string text;
    for (const char* sub : {"log", "munge"}) {
      if (!std::filesystem::is_directory(dir_ / sub)) continue;
      for (const auto& entry : std::filesystem::directory_iterator(dir_ / sub)) {
        const std::string name = entry.path().filename().string();
        if (name.ends_with(".log") || name.ends_with(".out") || name == "log")
          text += "--- " + entry.path().string() + "\n" + lastLines(entry.path(), lines_each);
      }
    }
    return text;
  }

  // Stops every process of the cluster by PID (SIGKILL: its state is thrown away), waits for each
  // to be gone (bounded; a survivor fails the test), and removes the directory. Idempotent.
  void stop() {
    const std::vector<pid_t> before = processes();
    for (auto& [node, slurmd] : slurmds_) killAndReap(*slurmd);
    slurmds_.clear();
    if (slurmctld_) killAndReap(*slurmctld_);
    slurmctld_.reset();
    for (const pid_t pid : before) ::kill(pid, SIGKILL);
    // What the daemons started before dying, and any process of before not gone yet: one killed
    // can leave processes() (its environment no longer readable) while it still exits.
    const auto survivors = [&] {
      std::vector<pid_t> left = processes();
      for (const pid_t pid : before)
        if (processRuns(pid) && std::find(left.begin(), left.end(), pid) == left.end())
          left.push_back(pid);
      if (munged_) std::erase(left, munged_->pid());
      return left;
    };
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(15);
    std::vector<pid_t> left = survivors();
    while (!left.empty() && std::chrono::steady_clock::now() < deadline) {
      for (const pid_t pid : left) ::kill(pid, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
      left = survivors();
    }
    if (munged_) killAndReap(*munged_);
    munged_.reset();
    if (!left.empty()) ADD_FAILURE() << "Slurm test cluster: " << left.size() << " processes left";
    restoreEnvironment();
    std::error_code ignored;
    if (!dir_.empty()) std::filesystem::remove_all(dir_, ignored);
    dir_.clear();
  }

 private:
  // ---- start-up

  void startMunge() {
    for (const char* sub : {"munge", "log", "spool"}) std::filesystem::create_directory(dir_ / sub);
    std::random_device random;
    std::string key(128, '\0');
    for (char& byte : key) byte = static_cast<char>(random());
    writePrivate(dir_ / "munge" / "munge.key", key);
    const std::filesystem::path munge = dir_ / "munge";
    munged_ = startDaemon(
        "munged",
        {kMunged, "-F", "-f", "--key-file=" + (munge / "munge.key").string(),
         "--socket=" + (munge / "sock").string(), "--pid-file=" + (munge / "pid").string(),
         "--log-file=" + (munge / "log").string(), "--seed-file=" + (munge / "seed").string()});
    const auto deadline = std::chrono::steady_clock::now() + options_.start_limit;
    while (!std::filesystem::exists(munge / "sock")) {
      if (munged_->poll() || std::chrono::steady_clock::now() > deadline)
        throw std::runtime_error("munged did not start:\n" + logTails());
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
  }

  // slurmctld and the slurmds, up to three times with fresh ports when a port was taken.
  void startSlurm() {
    for (int attempt = 1;; ++attempt) {
      chooseIds();
      writeConf();
      slurmctld_ = startDaemon("slurmctld", {kSlurmctld, "-D", "-c", "-f", conf().string()});
      for (const std::string& node : node_names_) slurmds_[node] = startSlurmd(node);
      const std::string failure = waitForStart();
      if (failure.empty()) return;
      const std::string tails = logTails();
      const bool port_taken = tails.find("Address already in use") != std::string::npos;
      for (auto& [node, slurmd] : slurmds_) killAndReap(*slurmd);
      slurmds_.clear();
      killAndReap(*slurmctld_);
      slurmctld_.reset();
      if (!port_taken || attempt == 3)
        throw std::runtime_error("Slurm test cluster in " + dir_.string() + ": " + failure + "\n" +
                                 tails);
      std::filesystem::remove_all(dir_ / "state");
      for (const auto& entry : std::filesystem::directory_iterator(dir_ / "log"))
        if (entry.path().filename().string().starts_with("slurm")) std::filesystem::remove(entry);
    }
  }

  std::unique_ptr<ChildProcess> startSlurmd(const std::string& node) {
    std::filesystem::create_directories(dir_ / "spool" / node);
    return startDaemon("slurmd-" + node, {kSlurmd, "-D", "-N", node, "-f", conf().string()});
  }

  // "" once every node is idle; else what went wrong (a daemon exited, or the time ran out).
  std::string waitForStart() {
    const auto deadline = std::chrono::steady_clock::now() + options_.start_limit;
    while (std::chrono::steady_clock::now() < deadline) {
      if (auto status = slurmctld_->poll()) return "slurmctld " + status->describe();
      for (auto& [node, slurmd] : slurmds_)
        if (auto status = slurmd->poll()) return "slurmd of " + node + " " + status->describe();
      if (allIdle()) return "";
      std::this_thread::sleep_for(std::chrono::milliseconds(50));
    }
    return "not every node idle within " + std::to_string(options_.start_limit.count()) +
           " s (sinfo: " + sinfo({"-h", "-N", "-o", "%N %t"}) + ")";
  }

  bool allIdle() const {
    const std::map<std::string, std::string> states = nodeStates();
    for (const std::string& node : node_names_) {
      auto found = states.find(node);
      if (found == states.end() || found->second != "idle") return false;
    }
    return true;
  }

  // Ports no other listener holds (bind-probed, outside the kernel's ephemeral range, random so
  // that two clusters started at once by two tests pick different ones) and a random FirstJobId
  // (so that job ids differ between clusters too).
  void chooseIds() {
    std::random_device random;
    std::mt19937 generator(random());
    auto [low, high] = ephemeralPortRange();
    std::uniform_int_distribution<int> pick(10000, low - 1 > 10000 ? low - 1 : 30000);
    std::set<int> chosen;
    while (static_cast<int>(chosen.size()) < options_.nodes + 1) {
      const int port = pick(generator);
      if ((port < low || port > high) && portIsFree(port)) chosen.insert(port);
    }
    std::vector<int> ports(chosen.begin(), chosen.end());
    std::shuffle(ports.begin(), ports.end(), generator);
    ctld_port_ = ports[0];
    slurmd_ports_.assign(ports.begin() + 1, ports.end());
    first_job_id_ = std::to_string(std::uniform_int_distribution<int>(100000, 60000000)(generator));
  }

  void writeConf() const {
    const std::string d = dir_.string();
    std::ostringstream c;
    c << "# A Slurm test cluster on one machine (tests/common/slurm_cluster.h, docs/slurm.md)\n"
      << "ClusterName=ringmaster\nSlurmctldHost=" << shortHostname() << "(127.0.0.1)"
      << "\nSlurmctldPort=" << ctld_port_ << "\nSlurmUser=root\nSlurmdUser=root\n"
      << "AuthType=auth/munge\nCryptoType=crypto/munge\nAuthInfo=socket=" << d << "/munge/sock\n"
      << "StateSaveLocation=" << d << "/state\nSlurmdSpoolDir=" << d << "/spool/%n\n"
      << "SlurmctldPidFile=" << d << "/slurmctld.pid\nSlurmdPidFile=" << d << "/slurmd-%n.pid\n"
      << "SlurmctldLogFile=" << d << "/log/slurmctld.log\nSlurmdLogFile=" << d
      << "/log/slurmd-%n.log\n"
      << "ProctrackType=proctrack/linuxproc\nTaskPlugin=task/none\nMpiDefault=none\n"
      << "SlurmdParameters=config_overrides\n"
      << "SchedulerType=sched/backfill\nSelectType=select/cons_tres\nSelectTypeParameters=CR_CPU\n"
      << "JobCompType=jobcomp/filetxt\nJobCompLoc=" << d << "/jobcomp.txt\n"
      << "ReturnToService=2\nKillWait=5\nMinJobAge=" << options_.min_job_age_s
      << "\nSlurmdTimeout=" << options_.slurmd_timeout_s
      << "\nMessageTimeout=" << options_.message_timeout_s << "\nFirstJobId=" << first_job_id_
      << "\n";
    for (const std::string& line : options_.extra_conf) c << line << "\n";
    for (size_t i = 0; i < node_names_.size(); ++i)
      c << "NodeName=" << node_names_[i] << " NodeHostname=" << shortHostname()
        << " NodeAddr=127.0.0.1 Port=" << slurmd_ports_[i] << " CPUs=" << options_.cpus_per_node
        << " RealMemory=" << options_.real_memory_mb << " State=UNKNOWN\n";
    const std::string nodes = "n[1-" + std::to_string(options_.nodes) + "]";
    c << "PartitionName=debug Nodes=" << nodes << " Default=YES MaxTime=" << options_.max_time
      << " State=UP\n";
    if (!options_.extra_partition.empty())
      c << "PartitionName=" << options_.extra_partition << " Nodes=" << nodes
        << " Default=NO MaxTime=" << options_.max_time << " State=UP\n";
    writePrivate(conf(), c.str());
  }

  // argv's program with stdout and stderr appended to log/NAME.out (through /bin/sh, whose script
  // is fixed: the arguments pass as data), in a session of its own, dying with this process.
  std::unique_ptr<ChildProcess> startDaemon(const std::string& name,
                                            const std::vector<std::string>& argv) const {
    ChildOptions o;
    o.argv = {"/bin/sh", "-c", "out=$1; shift; exec \"$@\" >>\"$out\" 2>&1", "sh",
              (dir_ / "log" / (name + ".out")).string()};
    o.argv.insert(o.argv.end(), argv.begin(), argv.end());
    o.stdout_mode = StreamMode::kNull;
    o.stderr_mode = StreamMode::kNull;
    o.new_session = true;
    return std::make_unique<ChildProcess>(o);
  }

  // ---- helpers

  static void killAndReap(ChildProcess& daemon) {
    daemon.signal(SIGKILL);
    daemon.waitFor(std::chrono::seconds(10));
  }

  void restoreEnvironment() {
    if (!exported_) return;
    if (previous_conf_)
      ::setenv("SLURM_CONF", previous_conf_->c_str(), 1);
    else
      ::unsetenv("SLURM_CONF");
    exported_ = false;
  }

  template <typename Probe>
  static std::string pollUntil(std::chrono::milliseconds limit, Probe probe) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    for (;;) {
      std::string found = probe();
      if (!found.empty() || std::chrono::steady_clock::now() > deadline) return found;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
  }

  static ExitStatus readUntilExit(ChildProcess& child, std::string& out, std::string& err,
                                  std::chrono::milliseconds limit) {
    const auto deadline = std::chrono::steady_clock::now() + limit;
    char buffer[65536];
    while (child.stdoutFd() >= 0 || child.stderrFd() >= 0) {
      if (std::chrono::steady_clock::now() > deadline) child.signal(SIGKILL);
      pollfd fds[2] = {{child.stdoutFd(), POLLIN, 0}, {child.stderrFd(), POLLIN, 0}};
      ::poll(fds, 2, 50);
      for (int i = 0; i < 2; ++i) {
        if (fds[i].fd < 0 || (fds[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
        const ssize_t n = ::read(fds[i].fd, buffer, sizeof buffer);
        if (n > 0)
          (i == 0 ? out : err).append(buffer, static_cast<size_t>(n));
        else if (n == 0 || (errno != EINTR && errno != EAGAIN))
          child.closeOutput(fds[i].fd);
      }
    }
    return child.wait();
  }

  static std::map<pid_t, pid_t> parentMap() {
    std::map<pid_t, pid_t> parents;
    for (const pid_t pid : processIds()) {
      const std::string text = readProcFile(pid, "stat");
      const size_t close = text.rfind(')');
      if (close == std::string::npos || close + 2 >= text.size()) continue;
      std::istringstream rest(text.substr(close + 2));
      char state = 0;
      pid_t ppid = 0;
      rest >> state >> ppid;
      parents[pid] = ppid;
    }
    return parents;
  }

  static bool descendsFrom(pid_t pid, pid_t ancestor, const std::map<pid_t, pid_t>& parents) {
    for (int depth = 0; pid > 1 && depth < 4096; ++depth) {
      if (pid == ancestor) return true;
      auto found = parents.find(pid);
      if (found == parents.end()) return false;
      pid = found->second;
    }
    return false;
  }

  static bool portIsFree(int port) {
    const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
    sockaddr_in address{};
    address.sin_family = AF_INET;
    address.sin_port = htons(static_cast<uint16_t>(port));
    address.sin_addr.s_addr = htonl(INADDR_ANY);  // slurmctld and slurmd listen on every address
    const bool free = ::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address) == 0;
    ::close(fd);
    return free;
  }

  static std::pair<int, int> ephemeralPortRange() {
    std::ifstream in("/proc/sys/net/ipv4/ip_local_port_range");
    int low = 32768, high = 60999;
    in >> low >> high;
    return {low, high};
  }

  static std::string shortHostname() {
    char name[256] = {};
    ::gethostname(name, sizeof name - 1);
    const std::string full = name;
    return full.substr(0, full.find('.'));
  }

  static void writePrivate(const std::filesystem::path& path, const std::string& text) {
    std::ofstream(path, std::ios::trunc | std::ios::binary) << text;
    std::filesystem::permissions(
        path, std::filesystem::perms::owner_read | std::filesystem::perms::owner_write);
  }

  static std::string lastLines(const std::filesystem::path& path, size_t count) {
    std::ifstream in(path);
    std::vector<std::string> lines;
    for (std::string line; std::getline(in, line);) lines.push_back(line);
    std::string text;
    for (size_t i = lines.size() > count ? lines.size() - count : 0; i < lines.size(); ++i)
      text += lines[i] + "\n";
    return text;
  }

  SlurmClusterOptions options_;
  std::filesystem::path dir_;
  std::vector<std::string> node_names_;
  int ctld_port_ = 0;
  std::vector<int> slurmd_ports_;
  std::string first_job_id_;
  std::unique_ptr<ChildProcess> munged_, slurmctld_;
  std::map<std::string, std::unique_ptr<ChildProcess>> slurmds_;
  bool exported_ = false;
  std::optional<std::string> previous_conf_;
};

// A test fixture with a cluster of clusterOptions() in cluster(), skipping (saying why) where
// Slurm is not installed. Override clusterOptions() for another shape.
class SlurmClusterTest : public ::testing::Test {
 protected:
  virtual SlurmClusterOptions clusterOptions() const { return {}; }
  void SetUp() override {
    if (const std::string why = slurmUnavailable(); !why.empty()) GTEST_SKIP() << why;
    cluster_ = std::make_unique<SlurmCluster>(clusterOptions());
  }
  void TearDown() override { cluster_.reset(); }
  SlurmCluster& cluster() { return *cluster_; }

 private:
  std::unique_ptr<SlurmCluster> cluster_;
};

}  // namespace ringmaster::testing
