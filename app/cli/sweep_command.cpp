// The sweep commands' front end over session/sweep: the member lines and the sweep's table,
// signals turned into stop requests, the detached driver (a daemon re-running this program as
// `sweep-driver ID`), and attach / cancel of a detached sweep through the database.
#include "cli/sweep_command.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <atomic>
#include <charconv>
#include <chrono>
#include <csignal>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <set>
#include <thread>

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "cli/ssh_prompts.h"
#include "cli/terminal.h"
#include "core/display_text.h"
#include "core/error.h"
#include "db/files.h"
#include "exit_codes.h"
#include "launcher/local_launcher.h"
#include "process/process_identity.h"
#include "query/figures.h"
#include "query/sweep_report.h"
#include "query/sweeps.h"
#include "recorder/recorder.h"
#include "recorder/sweep_records.h"
#include "run/run_session.h"
#include "sweep/sweep_runner.h"
#include "telemetry/writer.h"

namespace ringmaster::cli {

namespace fs = std::filesystem;
using nlohmann::json;
using Clock = std::chrono::steady_clock;

namespace {

// ---------------------------------------------------------------- signals

std::atomic<int> g_sweep_stop_signals{0};

void onSweepStopSignal(int) {
  g_sweep_stop_signals.fetch_add(1);
}

// SIGINT / SIGTERM counted while the object lives.
class SweepSignals {
 public:
  SweepSignals() {
    g_sweep_stop_signals = 0;
    struct sigaction action {};
    action.sa_handler = onSweepStopSignal;
    sigemptyset(&action.sa_mask);
    sigaction(SIGINT, &action, &old_int_);
    sigaction(SIGTERM, &action, &old_term_);
  }
  ~SweepSignals() {
    sigaction(SIGINT, &old_int_, nullptr);
    sigaction(SIGTERM, &old_term_, nullptr);
  }
  int count() const { return g_sweep_stop_signals.load(); }

 private:
  struct sigaction old_int_ {
  }, old_term_{};
};

// ---------------------------------------------------------------- member lines

// "optimizer.lr=0.001 train.micro_batches=4" from a member's recorded overrides.
std::string describeOverrides(const std::string& overrides_json) {
  session::MemberOverrides member;
  const nlohmann::ordered_json object = nlohmann::ordered_json::parse(overrides_json);
  for (const auto& [field, value] : object.items())
    member.emplace_back(field, json::parse(value.dump()));
  return session::describeMember(member);
}

// Prints each member's start and end, flushed (a detached driver's log is read as it grows).
class MemberLines {
 public:
  MemberLines(const storage::SweepRecord& sweep, bool quiet) : quiet_(quiet) {
    for (const storage::SweepMember& member : sweep.members)
      described_.push_back(describeOverrides(member.overrides_json));
  }

  void started(int position, int64_t run_id) const {
    say(position, fmt::format("run {} started", run_id));
  }
  void refused(int position, const std::string& error) const {
    say(position, fmt::format("refused: {}", displaySafe(error)));
  }
  void ended(int position, int64_t run_id, const std::string& status,
             const std::string& error) const {
    say(position,
        fmt::format("run {} {}{}", run_id, status, error.empty() ? "" : ": " + displaySafe(error)));
  }

 private:
  void say(int position, const std::string& what) const {
    if (quiet_) return;
    fmt::print(stderr, "member {}/{} ({}): {}\n", position + 1, described_.size(),
               described_.at(static_cast<size_t>(position)), what);
    std::fflush(stderr);
  }

  bool quiet_;
  std::vector<std::string> described_;
};

int exitCodeOfSweep(const storage::SweepRecord& sweep) {
  if (sweep.status == "cancelled") return kExitCancelled;
  if (sweep.status != "completed") return kExitFailed;
  for (const storage::SweepMember& member : sweep.members)
    if (member.state != "started" || member.run_status != "completed") return kExitFailed;
  return kExitOk;
}

// ---------------------------------------------------------------- the report

std::string valueCell(const json& value) {
  if (value.is_null()) return "-";
  if (value.is_string()) return displaySafeLine(value.get<std::string>());
  if (value.is_number()) return formatNumber(value.get<double>());
  return displaySafeLine(value.dump());
}

std::string figureCell(const json& figures, std::string_view id) {
  const auto it = figures.find(std::string(id));
  if (it == figures.end() || !it->is_number()) return "-";
  return formatNumber(it->get<double>());
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

void printBest(const json& report) {
  const json& best = report["best"];
  if (best.is_null()) {
    fmt::print("best: no run has the figure yet\n");
    return;
  }
  const std::string figure_id = best["figure"].get<std::string>();
  fmt::print("best by {} ({} is better): run {} (member {}), {}\n", storage::figure(figure_id).name,
             best["higher_is_better"].get<bool>() ? "higher" : "lower", best["run"].get<int64_t>(),
             best["position"].get<int>() + 1, valueCell(best["value"]));
  for (const json& difference : best["differences"]) {
    std::string others;
    for (const json& other : difference["others"])
      others += fmt::format("{}{}", others.empty() ? "" : ", ", valueCell(other));
    fmt::print("  {} = {}, where others have {}\n",
               displaySafeLine(difference["field"].get<std::string>()),
               valueCell(difference["value"]), others.empty() ? "-" : others);
  }
}

void printSweepTable(const json& report, const std::string& rank_by) {
  const json& sweep = report["sweep"];
  fmt::print("sweep {} '{}': {}, {}/{} members ended\n", sweep["id"].get<int64_t>(),
             displaySafeLine(sweep["name"].get<std::string>()), sweep["status"].get<std::string>(),
             sweep["ended"].get<int>(), sweep["members"].get<int>());
  std::vector<std::string> fields = sweep["fields"].get<std::vector<std::string>>();
  std::vector<std::string> figure_ids = {"final_loss", "samples_per_second"};
  if (!rank_by.empty() && rank_by != "final_loss" && rank_by != "samples_per_second")
    figure_ids.push_back(rank_by);
  std::vector<std::string> headers = {"MEMBER"};
  for (const std::string& field : fields) headers.push_back(upper(field));
  headers.insert(headers.end(), {"STATUS", "RUN"});
  for (const std::string& id : figure_ids)
    headers.push_back(upper(std::string(storage::figure(id).name)));
  Table table(headers);
  const bool colour = colourFor(stdout);
  std::vector<std::string> errors;
  for (const json& member : report["members"]) {
    const int position = member["position"].get<int>();
    std::vector<std::string> row = {std::to_string(position + 1)};
    for (const std::string& field : fields)
      row.push_back(valueCell(member["values"].value(field, json())));
    const std::string status = member["status"].get<std::string>().empty()
                                   ? member["state"].get<std::string>()
                                   : member["status"].get<std::string>();
    row.push_back(paint(status, statusColour(status), colour));
    row.push_back(member["run"].is_null() ? "-" : std::to_string(member["run"].get<int64_t>()));
    for (const std::string& id : figure_ids) row.push_back(figureCell(member["figures"], id));
    table.addRow(std::move(row));
    if (member["error"].is_string())
      errors.push_back(fmt::format("member {}: {}", position + 1,
                                   displaySafeMessageLine(member["error"].get<std::string>())));
  }
  table.print(stdout);
  for (const std::string& error : errors) fmt::print("{}\n", error);
  printBest(report);
}

// ---------------------------------------------------------------- running in the foreground

int parallelOf(const SweepCommandOptions& options, const session::PreparedSweep& sweep) {
  if (options.parallel == "auto") return session::autoParallel(sweep);
  if (options.parallel.empty()) return sweep.plan.parallel.value_or(1);
  int parallel = 0;
  const auto [end, error] = std::from_chars(
      options.parallel.data(), options.parallel.data() + options.parallel.size(), parallel);
  if (error != std::errc() || end != options.parallel.data() + options.parallel.size() ||
      parallel < 1 || parallel > 1024)
    RM_THROW(kInvalidArgument,
             fmt::format("--parallel {}: expected a number of runs in 1..1024, or auto",
                         displaySafeLine(options.parallel)));
  return parallel;
}

}  // namespace

int driveSweep(const std::string& db_path, int64_t sweep_id, double grace_s, bool quiet,
               bool json_report, bool print_report, const SweepSshOptions& ssh) {
  session::SweepRunner runner(db_path, sweep_id, grace_s);
  runner.setSsh(ssh.ssh_config);
#if RINGMASTER_HAVE_LIBSSH
  runner.setSshConnect(interactiveConnectOptions(ssh.accept_new_host_keys, ssh.known_hosts));
#endif
  storage::SweepRecord sweep = [&] {
    storage::Database db(db_path);
    return storage::loadSweep(db, sweep_id);
  }();
  const MemberLines lines(sweep, quiet);
  SweepSignals signals;
  int forwarded = 0;
  const session::SweepOutcome outcome = runner.run(
      {.on_tick =
           [&] {
             for (; forwarded < signals.count(); ++forwarded) runner.requestStop();
           },
       .on_started = [&](int position, int64_t run) { lines.started(position, run); },
       .on_refused = [&](int position,
                         const std::string& error) { lines.refused(position, error); },
       .on_ended = [&](int position, int64_t run, const std::string& status,
                       const std::string& error) { lines.ended(position, run, status, error); },
       .on_cancelling =
           [&] {
             if (!quiet)
               fmt::print(stderr,
                          "cancelling sweep {}: the running runs finish their step (Ctrl-C again "
                          "to kill them); the members not started are recorded so\n",
                          sweep_id);
           },
       .on_note =
           [&](const std::string& note) {
             if (!quiet) fmt::print(stderr, "sweep {}: {}\n", sweep_id, note);
           }});
  storage::Database db(db_path);
  sweep = storage::loadSweep(db, sweep_id);
  if (!quiet && outcome.not_started > 0)
    fmt::print(stderr, "{} member{} not started\n", outcome.not_started,
               outcome.not_started == 1 ? "" : "s");
  if (print_report) showSweepCommand(db, sweep_id, "", json_report);
  return exitCodeOfSweep(sweep);
}

namespace {

// ---------------------------------------------------------------- detached

// Starts this program as `--db DB sweep-driver ID` in a session of its own, its stdin /dev/null
// and its output appended to `log`, as a daemon: a grandchild, so that no one waits for it and it
// outlives this process. Everything it needs is prepared before the fork.
void spawnDriver(const std::string& db_path, int64_t sweep_id, double grace_s,
                 const SweepSshOptions& ssh, const fs::path& log) {
  const std::string self = fs::read_symlink("/proc/self/exe").string();
  std::vector<std::string> args = {self,
                                   "--db",
                                   fs::absolute(db_path).string(),
                                   "sweep-driver",
                                   std::to_string(sweep_id),
                                   "--grace",
                                   fmt::format("{}", grace_s)};
  if (ssh.known_hosts) args.insert(args.end(), {"--known-hosts", *ssh.known_hosts});
  if (ssh.ssh_config) args.insert(args.end(), {"--ssh-config", *ssh.ssh_config});
  if (ssh.accept_new_host_keys) args.push_back("--accept-new-host-keys");
  std::vector<char*> argv;
  for (std::string& arg : args) argv.push_back(arg.data());
  argv.push_back(nullptr);
  const int log_fd = ::open(log.c_str(), O_WRONLY | O_CREAT | O_APPEND | O_CLOEXEC, 0600);
  if (log_fd < 0)
    RM_THROW(kIo, fmt::format("cannot create the sweep's log {}: {}", log.string(),
                              std::strerror(errno)));
  const int null_fd = ::open("/dev/null", O_RDONLY | O_CLOEXEC);
  const pid_t child = ::fork();
  if (child == 0) {
    ::setsid();
    if (::fork() != 0) ::_exit(0);
    ::dup2(null_fd, STDIN_FILENO);
    ::dup2(log_fd, STDOUT_FILENO);
    ::dup2(log_fd, STDERR_FILENO);
    ::execv(argv[0], argv.data());
    ::_exit(127);
  }
  ::close(log_fd);
  if (null_fd >= 0) ::close(null_fd);
  if (child < 0) RM_THROW(kUnavailable, fmt::format("fork failed: {}", std::strerror(errno)));
  int status = 0;
  while (::waitpid(child, &status, 0) < 0 && errno == EINTR) {
  }
}

// Waits (at most 30 s) for the driver to record itself; throws, ending the sweep failed, when it
// does not.
storage::SweepRecord awaitDriver(const std::string& db_path, int64_t sweep_id,
                                 const fs::path& log) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  for (;;) {
    storage::Database db(db_path);
    storage::SweepRecord sweep = storage::loadSweep(db, sweep_id);
    if (sweep.driver_pid || sweep.status != "running") return sweep;
    if (Clock::now() > deadline) {
      storage::recordSweepMembersNotStarted(db, sweep_id);
      storage::finishSweep(db, sweep_id, "failed", telemetryNow());
      RM_THROW(kUnavailable, fmt::format("sweep {}'s driver did not start within 30 s (its log: "
                                         "{})",
                                         sweep_id, log.string()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
}

int detachSweep(const SweepCommandOptions& options, int64_t sweep_id) {
  const fs::path directory = session::sweepDirectory(options.db_path, sweep_id);
  storage::createDirectories(directory.parent_path());
  if (!storage::createDirectoryExclusive(directory))
    RM_THROW(kIo, fmt::format("the sweep directory {} already exists: it was left by an earlier "
                              "database at {}; move it away or remove it",
                              directory.string(), options.db_path));
  const fs::path log = directory / "driver.log";
  spawnDriver(options.db_path, sweep_id, options.grace_s, options.ssh, log);
  const storage::SweepRecord sweep = awaitDriver(options.db_path, sweep_id, log);
  if (options.json) {
    fmt::print("{}\n", json{{"sweep", sweep_id},
                            {"status", "detached"},
                            {"driver_pid", sweep.driver_pid.value_or(0)},
                            {"log", log.string()}}
                           .dump());
  } else {
    fmt::print("{}\n", sweep_id);
  }
  if (!options.quiet)
    fmt::print(stderr,
               "sweep {} is detached: its driver (pid {}) runs the members without this process "
               "(log in {}).\nfollow it: ringmaster --db {} attach --sweep {}\nstop it:   "
               "ringmaster --db {} cancel --sweep {}\n",
               sweep_id, sweep.driver_pid.value_or(0), log.string(), options.db_path, sweep_id,
               options.db_path, sweep_id);
  return kExitOk;
}

}  // namespace

int sweepCommand(const SweepCommandOptions& options) {
  defaultNodeBinary();  // no ringmaster-node: refused before anything is recorded
  const session::PreparedSweep prepared = session::prepareSweep(
      options.spec_path, {.axes = options.axes, .count = options.count, .seed = options.seed},
      options.overrides, options.name);
  const int parallel = parallelOf(options, prepared);
  int64_t sweep_id = 0;
  {
    storage::Database db(options.db_path);
    sweep_id = session::recordSweep(db, prepared, parallel, options.detach, telemetryNow());
  }
  if (!options.quiet)
    fmt::print(
        stderr, "ringmaster sweep {} '{}': {} {} member{} over {}, {} at once, recording to {}\n",
        sweep_id, displaySafeLine(prepared.name), prepared.plan.random ? "random" : "grid",
        prepared.members.size(), prepared.members.size() == 1 ? "" : "s",
        [&] {
          std::string fields;
          for (const session::SweepAxis& axis : prepared.plan.axes)
            fields += (fields.empty() ? "" : ", ") + axis.field;
          return displaySafeLine(fields);
        }(),
        parallel, options.db_path);
  if (options.detach) return detachSweep(options, sweep_id);
  return driveSweep(options.db_path, sweep_id, options.grace_s, options.quiet, options.json, true,
                    options.ssh);
}

int showSweepCommand(const storage::Database& db, int64_t sweep_id, const std::string& rank_by,
                     bool as_json) {
  const json report = storage::sweepReport(db, sweep_id, telemetryNow(), rank_by);
  if (as_json) {
    fmt::print("{}\n", report.dump(2));
    return kExitOk;
  }
  printSweepTable(report, rank_by);
  return kExitOk;
}

// ---------------------------------------------------------------- attach and cancel

namespace {

// A member's state as last printed.
struct SeenMember {
  std::string state, run_status;
};

bool runEnded(const std::string& status) {
  return !status.empty() && status != "running" && status != "pending";
}

// Prints what changed in the sweep's members since `seen`.
void printChanges(const storage::SweepRecord& sweep, const MemberLines& lines,
                  std::vector<SeenMember>& seen) {
  seen.resize(sweep.members.size());
  for (const storage::SweepMember& member : sweep.members) {
    SeenMember& before = seen[static_cast<size_t>(member.position)];
    if (member.state == "started" && before.state != "started")
      lines.started(member.position, member.run_id.value_or(0));
    if (member.state == "refused" && before.state != "refused")
      lines.refused(member.position, member.error.value_or(""));
    if (member.state == "started" && runEnded(member.run_status) && !runEnded(before.run_status))
      lines.ended(member.position, member.run_id.value_or(0), member.run_status,
                  member.run_status == "completed" ? "" : member.error.value_or(""));
    before = {member.state, member.run_status};
  }
}

std::optional<ProcessIdentity> driverOf(const storage::SweepRecord& sweep) {
  if (!sweep.driver_pid || !sweep.driver_start_time) return std::nullopt;
  return ProcessIdentity{.pid = static_cast<pid_t>(*sweep.driver_pid),
                         .start_time = static_cast<uint64_t>(*sweep.driver_start_time),
                         .boot_id = sweep.driver_boot_id};
}

// The processes of this machine whose command line names one of `spec_files` (a run's agent and
// workers are started with `--spec RUN_DIRECTORY/spec.json`).
std::vector<pid_t> processesNaming(const std::set<std::string>& spec_files) {
  std::vector<pid_t> found;
  if (spec_files.empty()) return found;
  std::error_code ec;
  for (const fs::directory_entry& entry : fs::directory_iterator("/proc", ec)) {
    const std::string name = entry.path().filename().string();
    if (name.empty() || name.find_first_not_of("0123456789") != std::string::npos) continue;
    std::ifstream in(entry.path() / "cmdline", std::ios::binary);
    for (std::string arg; std::getline(in, arg, '\0');) {
      if (spec_files.count(arg) == 0) continue;
      const pid_t pid = static_cast<pid_t>(std::stol(name));
      const std::optional<ProcessStat> stat = readProcessStat(pid);
      if (stat && stat->state != 'Z') found.push_back(pid);
      break;
    }
  }
  return found;
}

// After a cancel: waits (at most `grace_s` + 10 s) until no process of the sweep's runs is left;
// kExitOk when none is, else kExitFailed naming them.
int checkNoRunProcessLeft(const std::string& db_path, const storage::SweepRecord& sweep,
                          double grace_s, bool quiet) {
  std::set<std::string> spec_files;
  for (const storage::SweepMember& member : sweep.members)
    if (member.run_id)
      spec_files.insert(
          fs::absolute(session::runDirectory(db_path, *member.run_id) / "spec.json").string());
  const auto deadline =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>((grace_s + 10) * 1000));
  std::vector<pid_t> left;
  for (;;) {
    left = processesNaming(spec_files);
    if (left.empty() || Clock::now() > deadline) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
  }
  if (!left.empty()) {
    std::string pids;
    for (pid_t pid : left) pids += fmt::format(" {}", pid);
    fmt::print(stderr, "error: sweep {}: processes of its runs still running:{}\n", sweep.id, pids);
    return kExitFailed;
  }
  if (!quiet) fmt::print(stderr, "sweep {}: no process of its runs is left\n", sweep.id);
  return kExitOk;
}

// After the sweep's end is recorded its driver prints its table and exits: waits (at most 30 s)
// until it has, killing it after that.
void awaitDriverGone(const ProcessIdentity& driver, int64_t sweep_id) {
  const auto deadline = Clock::now() + std::chrono::seconds(30);
  while (identityRuns(driver)) {
    if (Clock::now() > deadline) {
      fmt::print(stderr, "sweep {}: its driver did not exit after the sweep ended; killing it\n",
                 sweep_id);
      signalIdentity(driver, SIGKILL);
      std::this_thread::sleep_for(std::chrono::milliseconds(200));
      return;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

// Refuses to cancel a sweep that has ended or whose driver is not this machine's to signal.
ProcessIdentity cancelTarget(const storage::SweepRecord& sweep) {
  if (sweep.status != "running")
    RM_THROW(kInvalidArgument, fmt::format("sweep {} has already ended ({}): there is nothing to "
                                           "cancel",
                                           sweep.id, sweep.status));
  const std::optional<ProcessIdentity> driver = driverOf(sweep);
  if (!driver)
    RM_THROW(kInvalidArgument,
             fmt::format("sweep {} has no driver recorded yet: try again in a moment", sweep.id));
  if (driver->boot_id != bootId())
    RM_THROW(kInvalidArgument,
             fmt::format("sweep {}'s driver runs on {} (another machine or boot): cancel it there",
                         sweep.id, displaySafeLine(sweep.driver_host)));
  return *driver;
}

}  // namespace

int attachSweepCommand(const std::string& db_path, int64_t sweep_id, bool cancel, double grace_s,
                       bool quiet) {
  const std::unique_ptr<storage::Database> db = openDatabaseForReading(db_path);
  storage::SweepRecord sweep = storage::loadSweep(*db, sweep_id);
  std::optional<ProcessIdentity> driver;
  if (cancel) {
    driver = cancelTarget(sweep);
    signalIdentity(*driver, SIGTERM);
    if (!quiet)
      fmt::print(stderr, "cancelling sweep {}: its running runs finish their step\n", sweep_id);
  } else if (!quiet) {
    fmt::print(stderr, "attached to sweep {} '{}' ({}, {}/{} members ended)\n", sweep_id,
               displaySafeLine(sweep.name), sweep.status, sweep.membersEnded(),
               sweep.members.size());
  }
  const MemberLines lines(sweep, quiet);
  std::vector<SeenMember> seen;
  // A cancel says what changes from now on; an attach first replays what happened so far.
  if (cancel) printChanges(sweep, MemberLines(sweep, /*quiet=*/true), seen);
  SweepSignals signals;
  // A cancelled driver that does not end (its runs' grace, then 30 s) is killed.
  const auto kill_at =
      Clock::now() + std::chrono::milliseconds(static_cast<int64_t>((grace_s + 30) * 1000));
  bool killed = false;
  for (;;) {
    if (!db->readOnly()) {
      storage::reconcileInterruptedSweeps(*db, telemetryNow(), session::sweepDriverRuns);
      storage::reconcileInterruptedRuns(*db);
    }
    sweep = storage::loadSweep(*db, sweep_id);
    printChanges(sweep, lines, seen);
    if (sweep.status != "running") break;
    if (signals.count() > 0 && !cancel) {
      if (!quiet)
        fmt::print(stderr,
                   "left sweep {}: it goes on (attach --sweep {} follows it again, cancel --sweep "
                   "{} stops it)\n",
                   sweep_id, sweep_id, sweep_id);
      return kExitOk;
    }
    if (cancel && !killed && Clock::now() > kill_at) {
      fmt::print(stderr, "sweep {}: its driver did not end; killing it\n", sweep_id);
      signalIdentity(*driver, SIGKILL);
      killed = true;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  showSweepCommand(*db, sweep_id, "", false);
  if (!cancel) return exitCodeOfSweep(sweep);
  awaitDriverGone(*driver, sweep_id);
  const int left = checkNoRunProcessLeft(db_path, sweep, grace_s, quiet);
  return left != kExitOk ? left : (sweep.status == "cancelled" ? kExitOk : exitCodeOfSweep(sweep));
}

namespace {

// Members over SSH: `run`'s options of the same names (a detached driver is given them too).
void addSweepSshOptions(CLI::App& command, SweepSshOptions& ssh) {
  command.add_option("--known-hosts", ssh.known_hosts,
                     "known_hosts file (default ~/.ssh/known_hosts)");
  command.add_option("--ssh-config", ssh.ssh_config, "ssh config file (default ~/.ssh/config)");
  command.add_flag("--accept-new-host-keys", ssh.accept_new_host_keys,
                   "accept and record the key of a host not yet in known_hosts");
}

}  // namespace

void addSweepCommands(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<SweepCommandOptions>();
  CLI::App* sweep = app.add_subcommand(
      "sweep", "run a spec over axes of field values (a grid or random draws), one run per member");
  sweep->add_option("spec", options->spec_path, "job spec (JSON), with or without a sweep section")
      ->required();
  sweep
      ->add_option("--axis", options->axes,
                   "FIELD=V1,V2,... (a grid axis) or FIELD=uniform(A,B) / log_uniform(A,B) / "
                   "int_uniform(A,B) (a random axis); repeatable")
      ->allow_extra_args(false);
  sweep->add_option("--count", options->count, "random search: the number of draws");
  sweep->add_option("--seed", options->seed, "random search: the seed (default 0)");
  sweep->add_option("--parallel", options->parallel,
                    "runs at once: a number, or auto (this machine's cores / the world size)");
  sweep->add_option("--name", options->name, "the sweep's name (default: the spec file's stem)");
  sweep
      ->add_option("--set", options->overrides,
                   "override a spec field for every member, FIELD=VALUE; repeatable")
      ->allow_extra_args(false);
  sweep->add_flag("--detach", options->detach,
                  "run the sweep in a driver process of its own and return, printing its id "
                  "(`attach --sweep` follows it, `cancel --sweep` stops it)");
  sweep->add_option("--grace", options->grace_s, "seconds from SIGTERM to SIGKILL when cancelling")
      ->default_val(5.0)
      ->check(CLI::Range(0.0, 3600.0));
  addSweepSshOptions(*sweep, options->ssh);
  sweep->add_flag("-q,--quiet", options->quiet, "no per-member lines");
  sweep->add_flag("--json", options->json, "print the final report as JSON");
  commands.add(sweep, [options](const CommonOptions& common) {
    options->db_path = common.databasePath();
    return sweepCommand(*options);
  });

  auto list_json = std::make_shared<bool>(false);
  CLI::App* sweeps = app.add_subcommand("sweeps", "list sweeps, newest first");
  sweeps->add_flag("--json", *list_json, "JSON instead of a table");
  commands.add(sweeps, [list_json](const CommonOptions& common) {
    const auto db = openDatabaseForReading(common.databasePath());
    if (!db->readOnly())
      storage::reconcileInterruptedSweeps(*db, telemetryNow(), session::sweepDriverRuns);
    const std::vector<storage::SweepRecord> list = storage::listSweeps(*db);
    if (*list_json) {
      json rows = json::array();
      for (const storage::SweepRecord& s : list)
        rows.push_back({{"id", s.id},
                        {"name", s.name},
                        {"status", s.status},
                        {"members", s.members.size()},
                        {"ended", s.membersEnded()},
                        {"created_at", s.created_at},
                        {"detached", s.detached}});
      fmt::print("{}\n", rows.dump(2));
      return static_cast<int>(kExitOk);
    }
    Table table({"ID", "NAME", "STATUS", "MEMBERS", "CREATED"});
    table.alignRight({0});
    const bool colour = colourFor(stdout);
    for (const storage::SweepRecord& s : list)
      table.addRow({std::to_string(s.id), displaySafeLine(s.name),
                    paint(s.status, statusColour(s.status), colour),
                    fmt::format("{}/{}", s.membersEnded(), s.members.size()),
                    formatTimestamp(s.created_at)});
    table.print(stdout);
    return static_cast<int>(kExitOk);
  });

  // The detached driver (sweep --detach): internal, not listed in --help.
  struct DriverOptions {
    int64_t sweep_id = 0;
    double grace_s = 5;
    SweepSshOptions ssh;
  };
  auto driver = std::make_shared<DriverOptions>();
  CLI::App* driver_command = app.add_subcommand("sweep-driver", "a detached sweep's driver");
  driver_command->add_option("sweep", driver->sweep_id, "sweep id")->required();
  driver_command->add_option("--grace", driver->grace_s, "seconds from SIGTERM to SIGKILL");
  addSweepSshOptions(*driver_command, driver->ssh);
  driver_command->group("");
  commands.add(driver_command, [driver](const CommonOptions& common) {
    return driveSweep(common.databasePath(), driver->sweep_id, driver->grace_s, false, false, true,
                      driver->ssh);
  });
}

}  // namespace ringmaster::cli
