// Issue 33, failures that show their error and the command line: real program jobs (plain Python
// scripts, no torch) recorded by `ringmaster run`. A rank that exits non-zero has its last stderr
// lines under the root cause in `show` and `show --json`, for every way a script fails (argparse's
// exit 2, a traceback, more lines than are kept, hostile bytes, one huge line), bounded and made
// safe; `ringmaster logs` filters by rank and text and follows a live run to its end; --db and
// --json are taken before and after every subcommand; a misspelled subcommand gets the nearest
// name. Every process is started by PID and reaped within its limit.
#include <gtest/gtest.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/cli_run.h"
#include "db/database.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;

// The bounds of storage/query/runs.h (kErrorOutputLines, kErrorOutputBytes).
constexpr size_t kKeptLines = 20;
constexpr size_t kKeptBytes = 4096;

// A way a script fails, and what its root cause must show.
struct Failure {
  std::string name;
  std::string script;                  // Python
  std::vector<std::string> args;       // passed to the script
  std::vector<std::string> shown;      // lines `show` has under the root cause
  std::vector<std::string> not_shown;  // text it must not have (older lines, raw controls)
};

std::vector<Failure> failures() {
  std::string many_lines =
      "import sys\nfor i in range(50):\n    print('line %d of 50' % i, "
      "file=sys.stderr)\nsys.exit(3)\n";
  return {
      {"argparse",
       "import argparse\nparser = argparse.ArgumentParser()\nparser.add_argument('--lr', "
       "type=float)\nparser.parse_args()\n",
       {"--lrr", "0.1"},
       {"usage: bad_args.py [-h] [--lr LR]",
        "bad_args.py: error: unrecognized arguments: --lrr 0.1"},
       {}},
      {"traceback",
       "def load():\n    raise ValueError('the data set is empty')\nload()\n",
       {},
       {"Traceback (most recent call last):", "ValueError: the data set is empty"},
       {}},
      {"many_lines", many_lines, {}, {"line 30 of 50", "line 49 of 50"}, {"line 29 of 50"}},
      {"hostile",
       "import sys\nsys.stderr.write('retitled \\x1b]0;owned\\x07 cleared \\x1b[2J <b>bold</b>"
       "\\n')\nsys.exit(4)\n",
       {},
       {"retitled \\x1b]0;owned\\x07 cleared \\x1b[2J <b>bold</b>"},
       {"\x1b", "\x07"}},
      {"huge_line",
       "import sys\nsys.stderr.write('x' * 30000 + '\\n')\nsys.stderr.write('the end\\n')\n"
       "sys.exit(5)\n",
       {},
       {"the end", "xxxxxxxxxx..."},
       {std::string(500, 'x')}},
  };
}

class FailureCli : public testing::CliRunTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    fs::create_directories(dir_);
  }

  // A program job running `script` (written as NAME.py) with `args` on `ranks` local ranks.
  std::string programSpec(const std::string& name, const std::string& script,
                          const std::vector<std::string>& args, int ranks = 1) {
    const fs::path path = dir_ / (name + ".py");
    std::ofstream(path) << script;
    return writeSpec(
        name,
        {{"name", name},
         {"program", {{"python", "/usr/bin/python3"}, {"script", path.string()}, {"args", args}}},
         {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", ranks}}}}, {"timeout_s", 60}}}});
  }

  // `ringmaster ARGS...` (no --db added), to its end.
  CapturedProcess finished(const std::vector<std::string>& args, int expected_code = 0) {
    CapturedProcess process(testing::ringmasterBinary(), args);
    const ExitStatus status = process.wait(60s);
    EXPECT_EQ(status.exit_code, expected_code)
        << fmt::format("{}\n{}\n{}", fmt::join(args, " "), process.out(), process.err());
    return process;
  }
  // Records a run of `spec` (however it ends); its id.
  int64_t record(const std::string& spec) {
    CapturedProcess run(testing::ringmasterBinary(), {"--db", dbPath(), "run", spec, "-q"});
    const ExitStatus ended = run.wait(60s);
    EXPECT_FALSE(ended.signal) << ended.describe() << run.err();
    storage::Database db(dbPath());
    return queryInt(db, "SELECT max(id) FROM runs");
  }
};

TEST_F(FailureCli, EveryWayAScriptFailsShowsItsLastStderrLinesUnderTheRootCause) {
  for (const Failure& failure : failures()) {
    SCOPED_TRACE(failure.name);
    const std::string spec = programSpec(failure.name == "argparse" ? "bad_args" : failure.name,
                                         failure.script, failure.args);
    const int64_t id = record(spec);
    storage::Database db(dbPath());
    ASSERT_EQ(queryInt(db, fmt::format("SELECT status = 'failed' FROM runs WHERE id = {}", id)), 1);

    // The text: the lines under the root cause, the rest of the report after them.
    const std::string text = finished({"--db", dbPath(), "show", std::to_string(id)}).out();
    const size_t cause = text.find("root cause rank 0");
    const size_t block = text.find("its stderr ended:", cause);
    ASSERT_NE(cause, std::string::npos) << text;
    ASSERT_NE(block, std::string::npos) << text;
    for (const std::string& line : failure.shown)
      EXPECT_NE(text.find(line, block), std::string::npos) << line << "\n" << text;
    for (const std::string& absent : failure.not_shown)
      EXPECT_EQ(text.find(absent), std::string::npos) << absent << "\n" << text;

    // The JSON: the same lines, within the bounds.
    const json report =
        json::parse(finished({"--db", dbPath(), "show", std::to_string(id), "--json"}).out());
    const json& output = report.at("error_output");
    ASSERT_TRUE(output.is_array());
    EXPECT_LE(output.size(), kKeptLines);
    size_t bytes = 0;
    std::string joined;
    for (const json& line : output) {
      bytes += line.get<std::string>().size() + 1;
      joined += line.get<std::string>() + "\n";
    }
    EXPECT_LE(bytes, kKeptBytes);
    for (const std::string& line : failure.shown)
      EXPECT_NE(joined.find(line), std::string::npos) << line << "\n" << joined;
    for (const std::string& absent : failure.not_shown)
      EXPECT_EQ(joined.find(absent), std::string::npos) << absent << "\n" << joined;
  }
}

TEST_F(FailureCli, ACompletedRunAndAFailureOfNoRankHaveNoErrorOutput) {
  // Completed: its stderr is in its logs, not under a root cause.
  const int64_t completed = record(programSpec(
      "fine", "import sys, ringmaster\nringmaster.init()\nprint('all good', file=sys.stderr)\n",
      {}));
  // Failed, but by no rank: its workers never said hello.
  const int64_t no_rank =
      record(programSpec("silent", "import sys\nprint('no init', file=sys.stderr)\n", {}));
  for (const auto& [id, status] :
       {std::pair{completed, "completed"}, std::pair{no_rank, "failed"}}) {
    SCOPED_TRACE(status);
    const json report =
        json::parse(finished({"--db", dbPath(), "show", std::to_string(id), "--json"}).out());
    EXPECT_EQ(report.at("run").at("status"), status);
    EXPECT_EQ(report.at("error_output"), json::array());
    const std::string text = finished({"--db", dbPath(), "show", std::to_string(id)}).out();
    EXPECT_EQ(text.find("its stderr ended"), std::string::npos) << text;
  }
}

// Two ranks, each writing its own lines and a shared one.
const char* const kTwoRankScript =
    "import os, sys\nrank = os.environ['RANK']\n"
    "for i in range(3):\n    print('rank %s says hello %d' % (rank, i), file=sys.stderr)\n"
    "print('shared line', file=sys.stderr)\n";

TEST_F(FailureCli, LogsFiltersByRankAndByText) {
  const int64_t id = record(programSpec("two", kTwoRankScript, {}, 2));
  const std::string run = std::to_string(id);
  auto lines = [&](std::vector<std::string> args) {
    args.insert(args.begin(), {"--db", dbPath(), "logs", run});
    std::vector<std::string> out;
    std::istringstream in(finished(args).out());
    for (std::string line; std::getline(in, line);) out.push_back(line);
    return out;
  };
  auto count = [](const std::vector<std::string>& in, const std::string& text) {
    return std::count_if(in.begin(), in.end(),
                         [&](const std::string& line) { return line.find(text) != line.npos; });
  };
  const std::vector<std::string> all = lines({});
  EXPECT_EQ(count(all, "rank 0 says hello"), 3);
  EXPECT_EQ(count(all, "rank 1 says hello"), 3);
  EXPECT_EQ(count(all, "shared line"), 2);

  const std::vector<std::string> rank1 = lines({"--rank", "1"});
  EXPECT_EQ(count(rank1, "rank 1 says hello"), 3);
  EXPECT_EQ(count(rank1, "shared line"), 1);
  for (const std::string& line : rank1) EXPECT_NE(line.find("  rank 1  "), line.npos) << line;

  const std::vector<std::string> hello = lines({"--grep", "says hello 2"});
  ASSERT_EQ(hello.size(), 2u) << fmt::format("{}", fmt::join(hello, "\n"));
  const std::vector<std::string> both = lines({"--rank", "0", "--grep", "hello"});
  ASSERT_EQ(both.size(), 3u) << fmt::format("{}", fmt::join(both, "\n"));
  EXPECT_TRUE(lines({"--grep", "no such text"}).empty());

  // JSON lines: rank, t, level, message.
  const std::vector<std::string> json_lines = lines({"--rank", "0", "--grep", "hello 1", "--json"});
  ASSERT_EQ(json_lines.size(), 1u);
  const json line = json::parse(json_lines[0]);
  EXPECT_EQ(line.at("rank"), 0);
  EXPECT_EQ(line.at("level"), "stderr");
  EXPECT_NE(line.at("message").get<std::string>().find("rank 0 says hello 1"), std::string::npos);

  // A run that does not exist is an error; so is a database that does not.
  finished({"--db", dbPath(), "logs", "999"}, 2);
  finished({"--db", (dir_ / "none.db").string(), "logs", "1"}, 2);
}

TEST_F(FailureCli, LogsFollowPrintsALiveRunsLinesAndEndsWithIt) {
  // Lines come while `logs --follow` runs: the script waits for the follower's first line.
  const fs::path go = dir_ / "go";
  const std::string script = fmt::format(
      "import os, sys, time, ringmaster\nringmaster.init()\n"
      "print('before the follower', file=sys.stderr, flush=True)\n"
      "deadline = time.time() + 30\nwhile not os.path.exists({:?}) and time.time() < deadline:\n"
      "    time.sleep(0.05)\nfor i in range(5):\n    print('tick %d' % i, file=sys.stderr, "
      "flush=True)\n    time.sleep(0.1)\n",
      go.string());
  CapturedProcess run(testing::ringmasterBinary(),
                      {"--db", dbPath(), "run", programSpec("live", script, {}), "-q"});
  // The run exists (and its first line is recorded) before the follower starts.
  const auto deadline = std::chrono::steady_clock::now() + 30s;
  bool started = false;
  while (!started && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(50ms);
    if (!fs::exists(dbPath())) continue;
    storage::Database db(dbPath());
    started = queryInt(db,
                       "SELECT count(*) FROM logs WHERE message LIKE "
                       "'%before the follower%'") > 0;
  }
  ASSERT_TRUE(started) << run.err();
  CapturedProcess follow(testing::ringmasterBinary(),
                         {"logs", "1", "--follow", "--rank", "0", "--db", dbPath()});
  ASSERT_TRUE(follow.waitForOutput("before the follower", 30s)) << follow.out() << follow.err();
  std::ofstream(go) << "go";
  // It prints every line as it comes and ends by itself when the run ends.
  const ExitStatus followed = follow.wait(60s);
  EXPECT_EQ(followed.exit_code, 0) << followed.describe() << follow.err();
  const ExitStatus ran = run.wait(60s);
  EXPECT_EQ(ran.exit_code, 0) << run.err();
  for (int i = 0; i < 5; ++i)
    EXPECT_NE(follow.out().find(fmt::format("tick {}", i)), std::string::npos) << follow.out();
  // Each line once.
  const std::string out = follow.out();
  EXPECT_EQ(out.find("tick 4"), out.rfind("tick 4")) << out;

  // An ended run: --follow prints what it has and returns.
  const CapturedProcess ended = finished({"--db", dbPath(), "logs", "1", "--follow"});
  EXPECT_NE(ended.out().find("tick 4"), std::string::npos);
}

TEST_F(FailureCli, GlobalOptionsAreTakenBeforeAndAfterEverySubcommand) {
  record(programSpec("one", "print('one')\n", {}));
  record(programSpec("two", "print('two')\n", {}));
  const std::string db = dbPath();
  const std::vector<std::vector<std::string>> commands = {
      {"runs"}, {"show", "1"}, {"compare", "1", "2"}, {"logs", "2"}};
  for (const std::vector<std::string>& command : commands) {
    SCOPED_TRACE(command.front());
    auto line = [&](std::vector<std::string> before, std::vector<std::string> after) {
      std::vector<std::string> args = std::move(before);
      args.insert(args.end(), command.begin(), command.end());
      args.insert(args.end(), after.begin(), after.end());
      return args;
    };
    // Ended runs: every position gives the same bytes.
    const std::string expected = finished(line({"--db", db}, {"--json"})).out();
    ASSERT_FALSE(expected.empty());
    const std::vector<std::vector<std::string>> variants = {
        line({}, {"--db", db, "--json"}),   line({"--json", "--db", db}, {}),
        line({"--json"}, {"--db", db}),     line({"--db", db, "--json"}, {}),
        line({}, {"--db=" + db, "--json"}),
    };
    for (const std::vector<std::string>& args : variants)
      EXPECT_EQ(finished(args).out(), expected) << fmt::format("{}", fmt::join(args, " "));
  }
  // --db with no value is still a usage error, wherever it stands.
  finished({"show", "1", "--db"}, 2);
}

TEST_F(FailureCli, AMisspelledSubcommandGetsTheNearestName) {
  const std::vector<std::pair<std::string, std::string>> typos = {{"shw", "show"},
                                                                  {"lgos", "logs"},
                                                                  {"comapre", "compare"},
                                                                  {"rnus", "runs"},
                                                                  {"exprot", "export"}};
  for (const auto& [typo, meant] : typos) {
    SCOPED_TRACE(typo);
    for (const std::vector<std::string>& args :
         {std::vector<std::string>{typo, "1"}, {"--db", dbPath(), typo, "1"}}) {
      const CapturedProcess process = finished(args, 2);
      EXPECT_NE(process.err().find(
                    fmt::format("unknown subcommand '{}' (did you mean '{}'?)", typo, meant)),
                std::string::npos)
          << process.err();
    }
  }
  // Nothing near: no guess, the list is named.
  const CapturedProcess far = finished({"xyzzy"}, 2);
  EXPECT_NE(far.err().find("unknown subcommand 'xyzzy' (`ringmaster --help` lists them)"),
            std::string::npos)
      << far.err();
  // With --json, the error is a JSON document too.
  const CapturedProcess as_json = finished({"--json", "shw", "1"}, 2);
  const json error = json::parse(as_json.out());
  EXPECT_EQ(error.at("error").at("kind"), "usage");
  EXPECT_NE(error.at("error").at("message").get<std::string>().find("did you mean 'show'?"),
            std::string::npos);
}

}  // namespace
}  // namespace ringmaster
