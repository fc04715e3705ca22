// `ringmaster` as a new user meets it (issue 15, "the first hour"): a missing database, unknown
// filter values, compare's arity, export's two outputs, JSON errors, a bad --set, where a run's
// checkpoints go, and the IDX example from generated files to a trained model, checked before
// launch when its data is missing. Every run is real; every process is reaped by CapturedProcess.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "common/test_paths.h"
#include "db/database.h"
#include "optim/lr_schedule.h"
#include "spec/memory_estimate.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;
using testing::CliResult;
using testing::exitedWith;

const std::string kRingmaster = testing::ringmasterBinary();
const std::string kNode = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster-node";

using testing::examplePath;

// A word for the shell, in single quotes.
std::string quoted(const std::string& word) {
  std::string out = "'";
  for (char c : word) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

class FirstHourCli : public storage::testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    fs::create_directories(dir_);
  }
  std::string dbPath() const { return (dir_ / "db" / "runs.db").string(); }

  // `ringmaster --db DB ARGS...`, run to the end.
  CliResult ringmaster(std::vector<std::string> args, std::chrono::seconds limit = 60s) {
    args.insert(args.begin(), {"--db", dbPath()});
    return testing::runToEnd(CapturedProcess(kRingmaster, args), limit);
  }
  // A command line run by bash in `cwd` (where a spec's relative paths start).
  CliResult inDirectory(const fs::path& cwd, const std::string& program,
                        const std::vector<std::string>& args, std::chrono::seconds limit = 120s) {
    std::string command = "cd " + quoted(cwd.string()) + " && exec " + quoted(program);
    for (const std::string& arg : args) command += " " + quoted(arg);
    return testing::runToEnd(CapturedProcess("/bin/bash", {"-c", command}), limit);
  }
  // A short real run of `name` recorded in the test's database.
  void recordRun(const std::string& name, std::vector<std::string> sets) {
    std::vector<std::string> args = {"run", examplePath(name), "-q"};
    for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
    const CliResult run = ringmaster(args, 120s);
    ASSERT_TRUE(run.status.ok()) << run.status.describe() << "\n" << run.err;
  }
};

// ---------------------------------------------------------------------------------------------
// The database

TEST_F(FirstHourCli, AMissingDatabaseIsAnErrorForEveryReadingCommandAndIsNotCreated) {
  const fs::path nowhere = dir_ / "no" / "such" / "runs.db";
  for (const std::vector<std::string>& command :
       std::vector<std::vector<std::string>>{{"runs"},
                                             {"show", "1"},
                                             {"compare", "1", "2"},
                                             {"export", "1", "--csv", (dir_ / "csv").string()},
                                             // Issue 32, point 7: they created one.
                                             {"attach", "1"},
                                             {"cancel", "1"}}) {
    std::vector<std::string> args = {"--db", nowhere.string()};
    args.insert(args.end(), command.begin(), command.end());
    const CliResult plain = testing::runToEnd(CapturedProcess(kRingmaster, args), 30s);
    SCOPED_TRACE(command.front());
    EXPECT_TRUE(exitedWith(plain.status, 2)) << plain.status.describe() << plain.err;
    EXPECT_NE(plain.err.find("no run database at " + nowhere.string()), std::string::npos)
        << plain.err;
    EXPECT_EQ(plain.out, "");

    args.push_back("--json");
    const CliResult as_json = testing::runToEnd(CapturedProcess(kRingmaster, args), 30s);
    EXPECT_TRUE(exitedWith(as_json.status, 2));
    const json error = json::parse(as_json.out)["error"];
    EXPECT_EQ(error["exit_code"], 2);
    EXPECT_NE(error["message"].get<std::string>().find("no run database"), std::string::npos);
  }
  EXPECT_FALSE(fs::exists(dir_ / "no")) << "a reading command created the database's directory";
}

TEST_F(FirstHourCli, TheDefaultDatabaseNotYetCreatedIsAnEmptyHistory) {
  // Before the first run `runs` says so and succeeds; it still creates nothing.
  const std::map<std::string, std::string> env = {{"XDG_DATA_HOME", (dir_ / "xdg").string()}};
  CapturedProcess table(kRingmaster, {"runs"}, env);
  const CliResult listed = testing::runToEnd(std::move(table), 30s);
  EXPECT_TRUE(listed.status.ok()) << listed.err;
  EXPECT_NE(listed.err.find("no runs yet"), std::string::npos) << listed.err;
  const CliResult as_json =
      testing::runToEnd(CapturedProcess(kRingmaster, {"runs", "--json"}, env), 30s);
  EXPECT_TRUE(as_json.status.ok());
  EXPECT_EQ(json::parse(as_json.out), json::array());
  EXPECT_FALSE(fs::exists(dir_ / "xdg"));
}

// ---------------------------------------------------------------------------------------------
// Arguments

TEST_F(FirstHourCli, AnUnknownStatusOrStrategyIsRefusedNamingTheChoices) {
  recordRun("single_mlp", {"train.steps=2"});
  const CliResult status = ringmaster({"runs", "--status", "bogus"});
  EXPECT_TRUE(exitedWith(status.status, 2)) << status.err;
  EXPECT_NE(status.err.find("bogus"), std::string::npos) << status.err;
  EXPECT_NE(status.err.find("completed"), std::string::npos) << status.err;
  EXPECT_EQ(status.out, "");

  const CliResult strategy = ringmaster({"runs", "--strategy", "zero3", "--json"});
  EXPECT_TRUE(exitedWith(strategy.status, 2)) << strategy.err;
  const json error = json::parse(strategy.out)["error"];
  EXPECT_EQ(error["kind"], "usage");
  EXPECT_NE(error["message"].get<std::string>().find("zero3"), std::string::npos);

  // A real value still filters.
  const CliResult completed = ringmaster({"runs", "--status", "completed", "--json"});
  ASSERT_TRUE(completed.status.ok()) << completed.err;
  EXPECT_EQ(json::parse(completed.out).size(), 1u);
  const CliResult failed = ringmaster({"runs", "--status", "failed", "--json"});
  EXPECT_EQ(json::parse(failed.out).size(), 0u);
}

TEST_F(FirstHourCli, CompareSaysTwoOrMoreAndComparesThree) {
  const CliResult help =
      testing::runToEnd(CapturedProcess(kRingmaster, {"compare", "--help"}), 30s);
  EXPECT_TRUE(help.status.ok());
  EXPECT_NE(help.out.find("two or more"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("x 2"), std::string::npos) << help.out;
  EXPECT_EQ(help.out.find("(2x)"), std::string::npos) << help.out;

  for (const char* steps : {"train.steps=2", "train.steps=3", "train.steps=4"})
    recordRun("single_mlp", {steps});
  const CliResult compared = ringmaster({"compare", "1", "2", "3", "--json"});
  ASSERT_TRUE(compared.status.ok()) << compared.err;
  const json document = json::parse(compared.out);
  ASSERT_EQ(document["runs"].size(), 3u);
  ASSERT_EQ(document["spec_differences"].size(), 1u);
  EXPECT_EQ(document["spec_differences"][0]["values"], json({"2", "3", "4"}));

  const CliResult one = ringmaster({"compare", "1"});
  EXPECT_TRUE(exitedWith(one.status, 2));
}

TEST_F(FirstHourCli, ExportWritesCsvAndTraceTogetherAndSaysWhatItNeeds) {
  recordRun("single_mlp", {"train.steps=3"});
  const fs::path csv = dir_ / "csv", trace = dir_ / "trace.json";
  const CliResult both =
      ringmaster({"export", "1", "--csv", csv.string(), "--trace", trace.string(), "--json"});
  ASSERT_TRUE(both.status.ok()) << both.err;
  const json written = json::parse(both.out);
  EXPECT_FALSE(written["files"].empty());
  for (const json& file : written["files"]) EXPECT_TRUE(fs::exists(file.get<std::string>()));
  EXPECT_EQ(written["file"], trace.string());
  EXPECT_GT(written["slices"].get<int64_t>(), 0);
  std::ifstream trace_file(trace);
  EXPECT_FALSE(json::parse(trace_file)["traceEvents"].empty());

  const CliResult neither = ringmaster({"export", "1"});
  EXPECT_TRUE(exitedWith(neither.status, 2));
  EXPECT_NE(neither.err.find("--csv DIR, --trace FILE or both"), std::string::npos) << neither.err;
  const CliResult help = testing::runToEnd(CapturedProcess(kRingmaster, {"export", "--help"}), 30s);
  EXPECT_NE(help.out.find("or both"), std::string::npos) << help.out;
}

TEST_F(FirstHourCli, WithJsonEveryErrorIsAJsonDocumentOnStdout) {
  recordRun("single_mlp", {"train.steps=2"});
  struct Case {
    std::vector<std::string> args;
    int code;
    std::string in_message;
  };
  const std::vector<Case> cases = {
      {{"show", "99", "--json"}, 2, "no run 99"},
      {{"compare", "1", "99", "--json"}, 2, "99"},
      {{"export", "99", "--trace", (dir_ / "t.json").string(), "--json"}, 2, "99"},
      {{"run", (dir_ / "missing.json").string(), "--json"}, 1, "missing.json"},
      {{"run", examplePath("ddp_mlp"), "--set", "train.steps=0", "--json"}, 2, "train.steps"},
      {{"show", "--json"}, 2, "run"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args.front() + " " + c.args[1]);
    const CliResult result = ringmaster(c.args);
    EXPECT_TRUE(exitedWith(result.status, c.code)) << result.status.describe() << result.err;
    const json document = json::parse(result.out, nullptr, false);
    ASSERT_TRUE(document.is_object()) << result.out;
    EXPECT_EQ(document["error"]["exit_code"], c.code);
    EXPECT_NE(document["error"]["message"].get<std::string>().find(c.in_message), std::string::npos)
        << document.dump();
    EXPECT_FALSE(result.err.empty());  // people still read stderr
  }
}

TEST_F(FirstHourCli, ABadSetBlamesTheSetNotTheSpecFile) {
  const CliResult run =
      ringmaster({"run", examplePath("ddp_mlp"), "--set", "train.steps=20", "--set",
                  "train.batch_size=-3", "--set", "optimizer.momentun=0.9"});
  EXPECT_TRUE(exitedWith(run.status, 2)) << run.err;
  EXPECT_NE(run.err.find("ddp_mlp.json itself is valid"), std::string::npos) << run.err;
  EXPECT_EQ(run.err.find("is not a valid job spec"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("train.batch_size: expected a positive integer, got -3 (from --set "
                         "train.batch_size=-3)"),
            std::string::npos)
      << run.err;
  EXPECT_NE(run.err.find("optimizer.momentun: unknown key"), std::string::npos) << run.err;
  EXPECT_NE(run.err.find("(from --set optimizer.momentun=0.9)"), std::string::npos) << run.err;
  EXPECT_FALSE(fs::exists(dbPath())) << "a refused spec recorded a run";

  // A broken file is still the file's, --set or not.
  const fs::path broken = dir_ / "broken.json";
  std::ofstream(broken) << R"({"name": "broken", "train": {"steps": 5}})";
  const CliResult file = ringmaster({"run", broken.string(), "--set", "train.steps=3"});
  EXPECT_TRUE(exitedWith(file.status, 2));
  EXPECT_NE(file.err.find(broken.string() + " is not a valid job spec"), std::string::npos)
      << file.err;
}

// ---------------------------------------------------------------------------------------------
// Examples

TEST_F(FirstHourCli, CheckpointsGoUnderTheRunsOwnDirectoryAndResumeFindsThem) {
  // fsdp_mlp names checkpoints/fsdp_mlp: nothing may appear in the working directory.
  const fs::path work = dir_ / "work";
  fs::create_directories(work);
  const auto run = [&](std::vector<std::string> sets) {
    std::vector<std::string> args = {"--db", dbPath(), "run", examplePath("fsdp_mlp")};
    for (const std::string& set : sets) args.insert(args.end(), {"--set", set});
    return inDirectory(work, kRingmaster, args, 240s);
  };
  const CliResult first =
      run({"train.steps=4", "checkpoint.every_steps=2", "telemetry.every_steps=1"});
  ASSERT_TRUE(first.status.ok()) << first.status.describe() << first.err;
  EXPECT_TRUE(fs::is_empty(work)) << "the run wrote into the working directory";
  const fs::path own = dir_ / "db" / "runs.db-runs" / "run-1" / "checkpoints" / "fsdp_mlp";
  EXPECT_NE(first.err.find("checkpoints in " + own.string()), std::string::npos) << first.err;
  EXPECT_TRUE(fs::is_directory(own / "rank_0_of_4" / "step_00000002")) << own;
  EXPECT_TRUE(fs::is_directory(own / "rank_3_of_4" / "step_00000004")) << own;

  // The recorded spec keeps the relative dir the user asked for (runs compare by it).
  storage::Database db(dbPath());
  EXPECT_EQ(storage::testing::queryText(
                db, "SELECT json_extract(spec, '$.checkpoint.dir') FROM runs WHERE id = 1"),
            "checkpoints/fsdp_mlp");

  // Resuming continues the earlier run's checkpoints: run 2 starts after step 4.
  const CliResult resumed = run({"train.steps=6", "checkpoint.every_steps=2",
                                 "telemetry.every_steps=1", "checkpoint.resume=true"});
  ASSERT_TRUE(resumed.status.ok()) << resumed.err;
  EXPECT_NE(resumed.err.find("resuming run 1's"), std::string::npos) << resumed.err;
  EXPECT_EQ(queryInt(db, "SELECT min(step) FROM steps WHERE run_id = 2"), 5);
  EXPECT_TRUE(fs::is_directory(own / "rank_0_of_4" / "step_00000006"));
  EXPECT_TRUE(fs::is_empty(work));
}

TEST_F(FirstHourCli, TheIdxExampleTrainsOnGeneratedFilesAndMissingDataIsRefusedBeforeLaunch) {
  const fs::path work = dir_ / "work";
  fs::create_directories(work);
  const std::vector<std::string> run_args = {"--db",  dbPath(),
                                             "run",   examplePath("idx_mnist"),
                                             "--set", "train.steps=150",
                                             "--set", "device=cpu",
                                             "--set", "checkpoint.every_steps=0",
                                             "--set", "telemetry.every_steps=1",
                                             "--json"};

  // No data yet: refused before anything is launched or recorded, saying how to get some.
  const CliResult missing = inDirectory(work, kRingmaster, run_args);
  EXPECT_TRUE(exitedWith(missing.status, 2)) << missing.status.describe() << missing.err;
  EXPECT_NE(missing.err.find("data.images: no file data/train-images-idx3-ubyte (from " +
                             work.string() + ")"),
            std::string::npos)
      << missing.err;
  EXPECT_NE(missing.err.find("`ringmaster-node make-idx data` writes"), std::string::npos)
      << missing.err;
  EXPECT_FALSE(fs::exists(dbPath()));

  // Something that is not IDX is refused the same way, naming the file's problem.
  fs::create_directories(work / "data");
  std::ofstream(work / "data" / "train-images-idx3-ubyte") << "not an idx file";
  std::ofstream(work / "data" / "train-labels-idx1-ubyte") << "nor this";
  const CliResult garbage = inDirectory(work, kRingmaster, run_args);
  EXPECT_TRUE(exitedWith(garbage.status, 2)) << garbage.err;
  EXPECT_NE(garbage.err.find("data.images: data/train-images-idx3-ubyte: bad magic number"),
            std::string::npos)
      << garbage.err;
  EXPECT_FALSE(fs::exists(dbPath()));

  // The way the message gives, then the example as shipped: it trains.
  const CliResult made = inDirectory(work, kNode, {"make-idx", "data", "--samples", "3000"});
  ASSERT_TRUE(made.status.ok()) << made.err;
  EXPECT_EQ(fs::file_size(work / "data" / "train-images-idx3-ubyte"), 16u + 3000u * 28 * 28);
  EXPECT_EQ(fs::file_size(work / "data" / "train-labels-idx1-ubyte"), 8u + 3000u);
  const CliResult trained = inDirectory(work, kRingmaster, run_args, 240s);
  ASSERT_TRUE(trained.status.ok()) << trained.status.describe() << trained.err;
  const json summary = json::parse(trained.out);
  EXPECT_EQ(summary["run"]["status"], "completed");
  EXPECT_EQ(summary["final_step"], 150);
  storage::Database db(dbPath());
  const double first = std::stod(storage::testing::queryText(
      db, "SELECT printf('%.17g', loss) FROM steps WHERE step = (SELECT min(step) FROM steps)"));
  const double last = std::stod(
      storage::testing::queryText(db, "SELECT printf('%.17g', loss) FROM steps WHERE step = 150"));
  // Ten classes start near ln 10 = 2.3; the generated digits are learnable.
  EXPECT_GT(first, 1.8);
  EXPECT_LT(last, 0.5 * first) << "loss " << first << " -> " << last;
}

TEST_F(FirstHourCli, TheGptTextExampleTrainsOnTheMadeTextAndMissingTextIsRefusedBeforeLaunch) {
  const fs::path work = dir_ / "work";
  fs::create_directories(work);
  const std::vector<std::string> run_args = {"--db",  dbPath(),
                                             "run",   examplePath("gpt_text"),
                                             "--set", "train.steps=12",
                                             "--set", "train.eval_every=6",
                                             "--set", "telemetry.every_steps=1",
                                             "--json"};

  // No text yet: refused before anything is launched or recorded, saying how to make it.
  const CliResult missing = inDirectory(work, kRingmaster, run_args);
  EXPECT_TRUE(exitedWith(missing.status, 2)) << missing.status.describe() << missing.err;
  EXPECT_NE(missing.err.find("data.path: no file data/licenses.txt (from " + work.string() + ")"),
            std::string::npos)
      << missing.err;
  EXPECT_NE(missing.err.find("`scripts/make-text.sh data/licenses.txt` writes it"),
            std::string::npos)
      << missing.err;
  EXPECT_FALSE(fs::exists(dbPath()));

  // The way the message gives, then the example (shortened): its 2 DDP ranks train and evaluate.
  const CliResult made = inDirectory(
      work, "/bin/bash", {std::string(ringmaster::testSourceDir()) + "/scripts/make-text.sh"});
  ASSERT_TRUE(made.status.ok()) << made.err;
  EXPECT_GT(fs::file_size(work / "data" / "licenses.txt"), 100000u);
  const CliResult trained = inDirectory(work, kRingmaster, run_args, 240s);
  ASSERT_TRUE(trained.status.ok()) << trained.status.describe() << trained.err;
  const json summary = json::parse(trained.out);
  EXPECT_EQ(summary["run"]["status"], "completed");
  EXPECT_EQ(summary["final_step"], 12);
  storage::Database db(dbPath());
  EXPECT_EQ(storage::testing::queryText(db, "SELECT count(DISTINCT rank) FROM steps"), "2");
  const double first = std::stod(storage::testing::queryText(
      db, "SELECT printf('%.17g', loss) FROM steps WHERE step = 1 AND rank = 0"));
  const double last = std::stod(storage::testing::queryText(
      db, "SELECT printf('%.17g', loss) FROM steps WHERE step = 12 AND rank = 0"));
  // Bytes start near ln 256 = 5.5 nats; a dozen AdamW steps already find the common letters.
  EXPECT_GT(first, 5.0);
  EXPECT_LT(last, first - 1.0) << "loss " << first << " -> " << last;
}

// `show` puts each rank's memory estimate, computed from the spec stored with the run, beside its
// measured peak, in the table and in --json.
TEST_F(FirstHourCli, ShowPutsTheSpecsMemoryEstimateBesideEachRanksMeasuredPeak) {
  recordRun("single_mlp", {"train.steps=2", "train.activation_checkpointing=true"});
  storage::Database db(dbPath());
  const std::vector<double> expected =
      estimatedRankTotals(storage::testing::queryText(db, "SELECT spec FROM runs"));
  ASSERT_EQ(expected.size(), 1u);
  const CliResult as_json = ringmaster({"show", "1", "--json"});
  ASSERT_TRUE(as_json.status.ok()) << as_json.err;
  const json rank = json::parse(as_json.out)["ranks"].at(0);
  EXPECT_GT(rank["peak_memory"].get<double>(), 0);
  EXPECT_DOUBLE_EQ(rank["estimated_memory"].get<double>(), expected[0]);
  const CliResult table = ringmaster({"show", "1"});
  ASSERT_TRUE(table.status.ok()) << table.err;
  EXPECT_NE(table.out.find("ESTIMATED"), std::string::npos) << table.out;
}

// A real run with a cosine schedule and a peak: every stored step's lr is the schedule's, and
// `show` reports tokens/s, MFU and the last lr; without a peak (the host's CPU has no known one)
// MFU is absent, never estimated.
TEST_F(FirstHourCli, StoredStepsFollowTheScheduleAndShowReportsTokensPerSecondAndMfu) {
  recordRun("single_mlp", {"train.steps=6", "telemetry.every_steps=1",
                           "optimizer.schedule.kind=cosine", "optimizer.schedule.warmup_steps=2",
                           "optimizer.schedule.min_lr=1e-4", "train.peak_tflops=0.5"});
  storage::Database db(dbPath());
  const LrSchedule schedule{.kind = LrScheduleKind::kCosine, .warmup_steps = 2, .min_lr = 1e-4};
  for (int64_t step = 1; step <= 6; ++step) {
    const double stored = std::stod(storage::testing::queryText(
        db,
        fmt::format("SELECT printf('%.17g', lr) FROM steps WHERE run_id = 1 AND step = {}", step)));
    // SQLite's printf keeps about 16 digits: equal as the float the optimizer used.
    EXPECT_FLOAT_EQ(stored, static_cast<float>(scheduledLr(schedule, 1e-3, step, 6))) << step;
  }
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM steps WHERE run_id = 1 AND tokens = 64 AND "
                     "tokens_per_s > 0 AND mfu > 0"),
            6);
  const CliResult as_json = ringmaster({"show", "1", "--json"});
  ASSERT_TRUE(as_json.status.ok()) << as_json.err;
  const json shown = json::parse(as_json.out);
  EXPECT_GT(shown["tokens_per_second"].get<double>(), 0);
  EXPECT_GT(shown["mfu"].get<double>(), 0);
  EXPECT_EQ(shown["lr"].get<double>(), static_cast<float>(scheduledLr(schedule, 1e-3, 6, 6)));
  EXPECT_GT(shown["ranks"].at(0)["tokens_per_second"].get<double>(), 0);
  const CliResult table = ringmaster({"show", "1"});
  ASSERT_TRUE(table.status.ok()) << table.err;
  // "learning rate": its name in the table of figures (issue 33; "lr" before).
  for (const char* text : {"tokens/s", "MFU", "learning rate ", "TOKENS/S"})
    EXPECT_NE(table.out.find(text), std::string::npos) << text << " in\n" << table.out;

  recordRun("single_mlp", {"train.steps=2"});
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM steps WHERE run_id = 2 AND tokens_per_s > 0 AND "
                     "mfu IS NULL"),
            2);
  const json without = json::parse(ringmaster({"show", "2", "--json"}).out);
  EXPECT_TRUE(without["mfu"].is_null());
  EXPECT_GT(without["tokens_per_second"].get<double>(), 0);
  EXPECT_EQ(without["lr"].get<double>(), static_cast<float>(1e-3));
}

// A real fp16 run whose first steps overflow (a loss scale of 2^40): every stored step carries its
// loss scale and whether it was skipped, the scale halves after each skip, and `show` prints the
// last scale and the count of skipped steps (and --json has both); an fp32 run has neither.
TEST_F(FirstHourCli, StoredFp16StepsCarryTheLossScaleAndShowCountsTheSkippedSteps) {
  recordRun("single_mlp", {"train.steps=6", "telemetry.every_steps=1", "train.precision=fp16",
                           "train.loss_scale.init=1099511627776"});
  storage::Database db(dbPath());
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM steps WHERE run_id = 1 AND loss_scale > 0 AND "
                     "skipped IN (0, 1)"),
            6);
  const int64_t skipped = queryInt(db, "SELECT sum(skipped) FROM steps WHERE run_id = 1");
  EXPECT_GE(skipped, 1) << "a scale of 2^40 did not overflow fp16";
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM steps a JOIN steps b ON b.run_id = a.run_id AND "
                     "b.rank = a.rank AND b.step = a.step + 1 WHERE a.run_id = 1 AND "
                     "a.skipped = 1 AND b.loss_scale * 2 = a.loss_scale"),
            skipped - queryInt(db,
                               "SELECT count(*) FROM steps WHERE run_id = 1 AND step = 6 AND "
                               "skipped = 1"));
  // The scale series reads like any metric.
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM scalar_points WHERE run_id = 1 AND metric = "
                     "'loss_scale'"),
            6);
  const CliResult as_json = ringmaster({"show", "1", "--json"});
  ASSERT_TRUE(as_json.status.ok()) << as_json.err;
  const json shown = json::parse(as_json.out);
  EXPECT_EQ(shown["skipped_steps"].get<int64_t>(), skipped);
  EXPECT_EQ(shown["ranks"].at(0)["skipped_steps"].get<int64_t>(), skipped);
  EXPECT_EQ(
      shown["loss_scale"].get<double>(),
      std::stod(storage::testing::queryText(
          db, "SELECT printf('%.17g', loss_scale) FROM steps WHERE run_id = 1 AND step = 6")));
  const CliResult table = ringmaster({"show", "1"});
  ASSERT_TRUE(table.status.ok()) << table.err;
  const std::string skipped_text = fmt::format("{} skipped step", skipped);
  for (const std::string& text : {std::string("loss scale "), skipped_text})
    EXPECT_NE(table.out.find(text), std::string::npos) << text << " in\n" << table.out;

  recordRun("single_mlp", {"train.steps=2"});
  EXPECT_EQ(queryInt(db,
                     "SELECT count(*) FROM steps WHERE run_id = 2 AND loss_scale IS NULL AND "
                     "skipped IS NULL"),
            2);
  const json without = json::parse(ringmaster({"show", "2", "--json"}).out);
  EXPECT_TRUE(without["loss_scale"].is_null());
  EXPECT_TRUE(without["skipped_steps"].is_null());
  EXPECT_EQ(ringmaster({"show", "2"}).out.find("loss scale"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster
