// A sweep's members run as RunSessions on threads of their own (each thread constructs, runs and
// ends its session, so its launcher's children die with it: PR_SET_PDEATHSIG is per thread),
// while the calling thread starts members as slots free up, forwards stop requests and records
// what the member threads report, through one connection to the database.
#include "sweep/sweep_runner.h"

#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <deque>
#include <filesystem>
#include <mutex>
#include <thread>

#include <fmt/format.h>

#include "core/error.h"
#include "core/host_name.h"
#include "db/database.h"
#include "launcher/local_launcher.h"
#include "process/process_identity.h"
#include "query/sweeps.h"
#include "recorder/sweep_records.h"
#include "run/run_session.h"
#include "spec/job_spec.h"
#include "telemetry/writer.h"

namespace ringmaster::session {

namespace fs = std::filesystem;
using nlohmann::json;

// ---------------------------------------------------------------- preparing and recording

namespace {

// Why each member's spec would be refused ("" where it is valid): the parser's problems.
std::string memberProblem(const json& base, const MemberOverrides& member) {
  json document = base;
  applyOverrides(document, overrideArguments(member));
  const SpecParseResult parsed = parseJobSpec(document);
  return parsed.ok() ? "" : parsed.describe();
}

}  // namespace

PreparedSweep prepareSweep(const std::string& spec_path, const SweepArguments& arguments,
                           const std::vector<std::string>& overrides, std::string name) {
  const std::string text = readJobSpecText(spec_path);
  if (const std::optional<SpecProblem> problem = checkSpecText(text))
    RM_THROW(kSpec, fmt::format("{} is not a valid job spec:\n{}", spec_path, problem->message));
  PreparedSweep sweep;
  sweep.plan = makeSweepPlan(text, arguments);
  sweep.base = withoutSweepSection(json::parse(text));
  applyOverrides(sweep.base, overrides);
  checkAxisFields(sweep.plan, sweep.base);
  sweep.members = sweep.plan.members();
  sweep.spec_path = spec_path;
  sweep.name = name.empty() ? fs::path(spec_path).stem().string() : std::move(name);
  std::string first_problem;
  for (const MemberOverrides& member : sweep.members) {
    const std::string problem = memberProblem(sweep.base, member);
    if (problem.empty()) {
      json document = sweep.base;
      applyOverrides(document, overrideArguments(member));
      const JobSpec spec = *parseJobSpec(document).spec;
      sweep.world_size = worldSize(spec);
      sweep.local = runsLocally(spec.launch);
      return sweep;
    }
    if (first_problem.empty())
      first_problem = fmt::format("{}: {}", describeMember(member), problem);
  }
  RM_THROW(kSpec, fmt::format("no member of the sweep has a valid spec; the first ({}):\n{}",
                              spec_path, first_problem));
}

int autoParallel(const PreparedSweep& sweep) {
  if (!sweep.local) return 1;
  const int cores = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  return std::max(1, cores / std::max(1, sweep.world_size));
}

int64_t recordSweep(storage::Database& db, const PreparedSweep& sweep, int parallel, bool detached,
                    double now) {
  storage::NewSweep record{.name = sweep.name,
                           .spec_path = sweep.spec_path,
                           .spec_json = sweep.base.dump(2),
                           .plan_json = sweep.plan.toJson().dump(),
                           .parallel = parallel,
                           .created_at = now,
                           .detached = detached};
  for (const MemberOverrides& member : sweep.members)
    record.member_overrides_json.push_back(overridesJson(member));
  return storage::createSweep(db, record);
}

fs::path sweepDirectory(const std::string& db_path, int64_t sweep_id) {
  return runDirectory(db_path, 0).parent_path() / fmt::format("sweep-{}", sweep_id);
}

// ---------------------------------------------------------------- the members' threads

// One member: its overrides, and the thread running it while it runs.
struct SweepRunner::Member {
  int position = 0;
  std::vector<std::string> overrides;  // "field=<json>"
  // Under Slurm: the sweep's allocation, when the member runs as a step of it.
  std::optional<std::string> slurm_allocation;
  std::thread thread;
  std::atomic<bool> finished{false};
};

// What the member threads report to the recording thread.
struct SweepRunner::Events {
  enum class Kind { kStarted, kRefused, kEnded };
  struct Event {
    Kind kind;
    int position = 0;
    int64_t run_id = 0;
    std::string status, error;
  };
  std::mutex mutex;
  std::condition_variable wake;
  std::deque<Event> queue;

  void post(Event event) {
    {
      std::lock_guard lock(mutex);
      queue.push_back(std::move(event));
    }
    wake.notify_one();
  }
  std::deque<Event> take(std::chrono::milliseconds wait) {
    std::unique_lock lock(mutex);
    wake.wait_for(lock, wait, [this] { return !queue.empty(); });
    return std::exchange(queue, {});
  }
};

SweepRunner::SweepRunner(std::string db_path, int64_t sweep_id, double grace_s)
    : db_path_(std::move(db_path)),
      sweep_id_(sweep_id),
      grace_s_(grace_s),
      events_(std::make_unique<Events>()) {
  storage::Database db(db_path_);
  const storage::SweepRecord sweep = storage::loadSweep(db, sweep_id_);
  if (sweep.status != "running")
    RM_THROW(kInvalidArgument, fmt::format("sweep {} has ended ({}): there is nothing to run",
                                           sweep_id_, sweep.status));
  parallel_ = std::max(1, sweep.parallel);
  spec_path_ = sweep.spec_path;
  spec_text_ = sweep.spec_json;
  for (const storage::SweepMember& recorded : sweep.members) {
    if (recorded.state != "planned") continue;
    auto member = std::make_unique<Member>();
    member->position = recorded.position;
    const nlohmann::ordered_json overrides = nlohmann::ordered_json::parse(recorded.overrides_json);
    for (const auto& [field, value] : overrides.items())
      member->overrides.push_back(field + "=" + value.dump());
    members_.push_back(std::move(member));
  }
}

SweepRunner::~SweepRunner() {
  // run() joins every thread it started, whatever happens; this is for a run() never called.
  for (auto& member : members_)
    if (member->thread.joinable()) member->thread.join();
}

void SweepRunner::startMember(Member& member) {
  member.thread = std::thread([this, &member] {
    runMember(member);
    member.finished = true;
    events_->wake.notify_one();
  });
}

// On the member's thread: construct the run (a refusal ends here), run it with the sweep's stop
// requests forwarded, report its end.
void SweepRunner::runMember(Member& member) {
  using Kind = Events::Kind;
  int64_t run_id = 0;
  try {
    RunRequest request{.spec_path = spec_path_,
                       .spec_text = spec_text_,
                       .db_path = db_path_,
                       .overrides = member.overrides,
                       .grace_s = grace_s_,
                       .slurm_allocation = member.slurm_allocation,
                       .ssh_config = ssh_config_};
#if RINGMASTER_HAVE_LIBSSH
    request.connect = connect_;
#endif
    RunSession run(std::move(request));
    run_id = run.runId();
    events_->post({.kind = Kind::kStarted, .position = member.position, .run_id = run_id});
    int forwarded = 0;
    const auto forward = [&] {
      for (; forwarded < stop_requests_.load(); ++forwarded) run.requestStop();
    };
    forward();
    const RunOutcome outcome =
        run.run({.on_tick = forward, .stop_launch = [this] { return stop_requests_.load() > 0; }});
    events_->post({.kind = Kind::kEnded,
                   .position = member.position,
                   .run_id = run_id,
                   .status = outcome.status,
                   .error = outcome.finish_failure.value_or("")});
  } catch (const std::exception& e) {
    const Error* error = dynamic_cast<const Error*>(&e);
    const std::string message = error ? error->message() : e.what();
    if (run_id == 0)
      events_->post({.kind = Kind::kRefused, .position = member.position, .error = message});
    else
      events_->post({.kind = Kind::kEnded,
                     .position = member.position,
                     .run_id = run_id,
                     .status = "failed",
                     .error = message});
  }
}

// ---------------------------------------------------------------- the recording loop

void SweepRunner::handleEvents(storage::Database& db, const SweepObserver& observer,
                               SweepOutcome& outcome) {
  using Kind = Events::Kind;
  for (const Events::Event& event : events_->take(std::chrono::milliseconds(100))) {
    switch (event.kind) {
      case Kind::kStarted:
        storage::recordSweepMemberStarted(db, sweep_id_, event.position, event.run_id);
        if (observer.on_started) observer.on_started(event.position, event.run_id);
        break;
      case Kind::kRefused:
        storage::recordSweepMemberRefused(db, sweep_id_, event.position, event.error);
        ++outcome.refused;
        if (observer.on_refused) observer.on_refused(event.position, event.error);
        break;
      case Kind::kEnded:
        if (event.status == "completed")
          ++outcome.completed;
        else if (event.status == "cancelled")
          ++outcome.cancelled;
        else
          ++outcome.failed;
        if (observer.on_ended)
          observer.on_ended(event.position, event.run_id, event.status, event.error);
        break;
    }
  }
}

namespace {

storage::SweepDriver thisDriver() {
  const std::optional<ProcessIdentity> self = processIdentity(::getpid());
  return {.pid = ::getpid(),
          .start_time = self ? static_cast<int64_t>(self->start_time) : 0,
          .boot_id = bootId(),
          .host = thisHostName()};
}

}  // namespace

bool sweepDriverRuns(const storage::SweepDriver& driver) {
  if (driver.host != thisHostName()) return true;
  return identityRuns({.pid = static_cast<pid_t>(driver.pid),
                       .start_time = static_cast<uint64_t>(driver.start_time),
                       .boot_id = driver.boot_id});
}

// Under Slurm, the allocation the members share where their sizes allow (run/slurm_sweep.h); none
// for a sweep with no member under Slurm. Refused, each member runs as its own job.
SlurmSweepAllocation SweepRunner::shareSlurmAllocation(const SweepObserver& observer) {
  const auto note = [&](const std::string& text) {
    if (observer.on_note) observer.on_note(text);
  };
  std::vector<JobSpec> specs;
  for (const auto& member : members_) {
    try {
      specs.push_back(memberSpec(spec_text_, member->overrides));
    } catch (const Error&) {
      specs.emplace_back();  // refused by its own RunSession when it starts
    }
  }
  try {
    SlurmSweepAllocation allocation =
        allocateForSweep({.members = specs,
                          .parallel = parallel_,
                          .dir = (sweepDirectory(db_path_, sweep_id_) / "slurm").string()});
    if (!allocation.jobId().empty())
      note(fmt::format("the members share Slurm allocation {}", allocation.jobId()));
    for (size_t i = 0; i < members_.size(); ++i) {
      members_[i]->slurm_allocation = allocation.allocationFor(i);
      const std::string why = allocation.ownJobReason(i);
      if (!why.empty())
        note(fmt::format("member {} runs as its own Slurm job: {}", members_[i]->position, why));
    }
    return allocation;
  } catch (const Error& error) {
    note(fmt::format("no shared Slurm allocation ({}): each member runs as its own Slurm job",
                     error.message()));
    return {};
  }
}

SweepOutcome SweepRunner::run(const SweepObserver& observer) {
  RM_ENFORCE(!ran_, "SweepRunner::run is called once");
  ran_ = true;
  storage::Database db(db_path_);
  storage::recordSweepDriver(db, sweep_id_, thisDriver());
  // Released by its destructor on every path, after the members' threads are joined.
  SlurmSweepAllocation allocation = shareSlurmAllocation(observer);
  SweepOutcome outcome;
  size_t next = 0;
  int running = 0;
  bool cancelling = false;
  const auto joinFinished = [&] {
    for (auto& member : members_) {
      if (member->thread.joinable() && member->finished) {
        member->thread.join();
        --running;
      }
    }
  };
  try {
    for (;;) {
      if (observer.on_tick) observer.on_tick();
      if (stop_requests_ > 0 && !cancelling) {
        cancelling = true;
        if (observer.on_cancelling) observer.on_cancelling();
      }
      handleEvents(db, observer, outcome);
      joinFinished();
      for (; !cancelling && running < parallel_ && next < members_.size(); ++next, ++running)
        startMember(*members_[next]);
      if (running == 0 && (cancelling || next == members_.size())) break;
    }
    handleEvents(db, observer, outcome);
    const std::string release_failure = allocation.release();
    if (!release_failure.empty() && observer.on_note)
      observer.on_note("releasing the Slurm allocation: " + release_failure);
    outcome.not_started = cancelling ? storage::recordSweepMembersNotStarted(db, sweep_id_) : 0;
    outcome.status = cancelling ? "cancelled" : "completed";
    storage::finishSweep(db, sweep_id_, outcome.status, telemetryNow());
  } catch (...) {
    // Recording failed: the runs are killed rather than left unrecorded, every thread joined.
    stop_requests_ += 2;
    for (auto& member : members_)
      if (member->thread.joinable()) member->thread.join();
    try {
      storage::recordSweepMembersNotStarted(db, sweep_id_);
      storage::finishSweep(db, sweep_id_, "failed", telemetryNow());
    } catch (...) {
      // The sweep shows as interrupted from the next start (reconcileInterruptedSweeps).
    }
    throw;
  }
  return outcome;
}

}  // namespace ringmaster::session
