// Terminal escape injection (issue 16, finding 6): a stand-in node agent whose telemetry (hello
// host and device, a log line, an error) and stderr carry a screen clear (ESC[2J), an 8-bit CSI
// (U+009B and the raw byte 0x9B), a title change (OSC), a right-to-left override (U+202E) and
// rich text; `ringmaster run`, `show`, `runs` and `compare` must print none of it raw, only its
// visible escapes, and `show --json` must stay valid JSON.
#include <fmt/format.h>
#include <gtest/gtest.h>
#include <sys/stat.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "core/display_text.h"
#include "db/database.h"
#include "storage/storage_test_support.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::CapturedProcess;

const std::string kRingmaster = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster";

// Hostile text as valid UTF-8 (telemetry is JSON): ESC[2J, U+009B (C1 CSI), OSC title, U+202E.
const std::string kHostile =
    "boom\x1b[2J \xC2\x9B"
    "31m \x1b]0;pwned\x07 \xE2\x80\xAE"
    "cod.exe <b>b</b>";
// What a worker's stderr may carry besides: the raw byte 0x9B (8-bit CSI, invalid UTF-8) and \r.
const std::string kHostileLog =
    "[rank 0] log\x1b[2J \x9B"
    "31m \rover \xE2\x80\xAE"
    "evil";

// Every raw byte sequence that must not reach the output.
void expectNothingRaw(const std::string& output, const std::string& what) {
  for (const std::string& raw :
       {std::string("\x1b"), std::string("\xC2\x9B"), std::string("\xE2\x80\xAE"),
        std::string("\x07"), std::string("\r")}) {
    EXPECT_EQ(output.find(raw), std::string::npos)
        << what << " holds a raw " << ::testing::PrintToString(raw) << ":\n"
        << output;
  }
  for (unsigned char c : output) {
    EXPECT_NE(c, 0x9B) << what << " holds a raw 0x9b byte";
    if (c == 0x9B) break;
  }
}

class EscapeInjection : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() /
           fmt::format("ringmaster_escape_{}_{}", ::getpid(),
                       ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  // A stand-in for ringmaster-node: prints hostile telemetry and stderr, and fails.
  std::string writeFakeNode() const {
    HelloEvent hello;
    hello.host = "evil\x1b]0;pwned\x07host";
    hello.device = "cpu\xE2\x80\xAE";
    hello.device_name = kHostile;
    hello.strategy = "single";
    std::vector<TelemetryEvent> events = {
        {.rank = 0, .seq = 0, .time = 1e9, .body = hello},
        {.rank = 0, .seq = 1, .time = 1e9 + 1, .body = LogEvent{LogLevel::kError, kHostile}},
        {.rank = 0,
         .seq = 2,
         .time = 1e9 + 2,
         .body = ErrorEvent{.message = kHostile, .kind = "io", .where = "x.cpp:1"}},
        {.rank = 0, .seq = 3, .time = 1e9 + 3, .body = DoneEvent{.status = DoneStatus::kFailed}},
    };
    const fs::path telemetry = dir_ / "telemetry.jsonl";
    const fs::path log = dir_ / "stderr.txt";
    {
      std::ofstream out(telemetry, std::ios::binary);
      for (const TelemetryEvent& event : events) out << encodeEvent(event) << "\n";
      std::ofstream(log, std::ios::binary) << kHostileLog << "\n";
    }
    const fs::path node = dir_ / "fake-node";
    std::ofstream(node) << fmt::format("#!/bin/sh\ncat '{}'\ncat '{}' >&2\nexit 1\n",
                                       telemetry.string(), log.string());
    fs::permissions(node, fs::perms::owner_all);
    return node.string();
  }

  // A stand-in for ringmaster-node printing `events` as telemetry and exiting with `exit_code`.
  std::string writeNode(const std::vector<TelemetryEvent>& events, int exit_code) const {
    const fs::path telemetry = dir_ / "events.jsonl";
    {
      std::ofstream out(telemetry, std::ios::binary);
      for (const TelemetryEvent& event : events) out << encodeEvent(event) << "\n";
    }
    const fs::path node = dir_ / "node";
    std::ofstream(node) << fmt::format("#!/bin/sh\ncat '{}'\nexit {}\n", telemetry.string(),
                                       exit_code);
    fs::permissions(node, fs::perms::owner_all);
    return node.string();
  }

  // Runs `ringmaster --db DB <args>` to the end; returns stdout + stderr.
  std::string ringmaster(std::vector<std::string> args, const std::string& node = "") {
    args.insert(args.begin(), {"--db", (dir_ / "runs.db").string()});
    std::map<std::string, std::string> env = {{"NO_COLOR", "1"}};
    if (!node.empty()) env["RINGMASTER_NODE"] = node;
    CapturedProcess process(kRingmaster, args, env);
    const ExitStatus status = process.wait(60s);
    last_status_ = status;
    return process.out() + process.err();
  }

  fs::path dir_;
  ExitStatus last_status_;
};

TEST_F(EscapeInjection, RunShowRunsAndComparePrintHostileTextOnlyEscaped) {
  const std::string node = writeFakeNode();
  const std::string spec =
      std::string(ringmaster::testSourceDir()) + "/resources/examples/single_mlp.json";
  const std::string run = ringmaster({"run", "-v", spec}, node);
  EXPECT_FALSE(last_status_.ok()) << run;
  expectNothingRaw(run, "ringmaster run");
  EXPECT_NE(run.find("\\x1b[2J"), std::string::npos) << run;
  EXPECT_NE(run.find("\\u202e"), std::string::npos) << run;
  EXPECT_NE(run.find("\\x9b31m"), std::string::npos) << run;  // the raw byte of the log line

  const std::string again = ringmaster({"run", spec}, node);
  expectNothingRaw(again, "the second ringmaster run");

  const std::string show = ringmaster({"show", "1"});
  ASSERT_TRUE(last_status_.ok()) << show;
  expectNothingRaw(show, "ringmaster show");
  EXPECT_NE(show.find("boom\\x1b[2J \\u009b31m \\x1b]0;pwned\\x07 \\u202ecod.exe <b>b</b>"),
            std::string::npos)
      << show;
  EXPECT_NE(show.find("evil\\x1b]0;pwned\\x07host"), std::string::npos) << show;

  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"runs"}, {"compare", "1", "2"}}) {
    const std::string output = ringmaster(command);
    EXPECT_TRUE(last_status_.ok()) << output;
    expectNothingRaw(output, "ringmaster " + command[0]);
  }

  // JSON escapes what it holds itself: it must parse and give back the text exactly.
  const std::string json_text = ringmaster({"show", "1", "--json"});
  ASSERT_TRUE(last_status_.ok()) << json_text;
  EXPECT_EQ(json_text.find('\x1b'), std::string::npos);
  const nlohmann::json document = nlohmann::json::parse(json_text);
  EXPECT_NE(document.dump().find("\\u001b[2J"), std::string::npos);
}

// Issue 32, point 7: a 500 KB host name printed a 500 KB row. Long telemetry text (a host, a
// device name, an op, a group, a log line, an error) is cut at ingest to its bound (a name to 256
// bytes, a message to 64 KiB), the cut logged as a warning; and whatever a database holds (an
// older one's 500 KB host), `run`, `show`, `runs` and `compare` print every name bounded and every
// message bounded.
TEST_F(EscapeInjection, LongTelemetryTextIsCutAtIngestAndBoundedOnDisplay) {
  const std::string host(500'000, 'h');
  HelloEvent hello{.host = host,
                   .device = "cpu",
                   .device_name = std::string(300'000, 'd'),
                   .strategy = "single"};
  const std::vector<TelemetryEvent> events = {
      {.rank = 0, .seq = 0, .time = 1e9, .body = hello},
      {.rank = 0,
       .seq = 1,
       .time = 1e9 + 1,
       .body = StepEvent{.step = 1, .loss = 1, .samples = 8, .step_ms = 1}},
      {.rank = 0,
       .seq = 2,
       .time = 1e9 + 2,
       .body = CommEvent{.op = std::string(200'000, 'o'),
                         .group = std::string(200'000, 'g'),
                         .bytes = 8,
                         .dtype = "float32",
                         .duration_ms = 1,
                         .step = 1}},
      {.rank = 0,
       .seq = 3,
       .time = 1e9 + 3,
       .body = LogEvent{LogLevel::kWarn, std::string(900'000, 'L')}},
      {.rank = 0,
       .seq = 4,
       .time = 1e9 + 4,
       .body = ErrorEvent{.message = std::string(900'000, 'E'), .kind = "io", .fatal = true}},
      {.rank = 0, .seq = 5, .time = 1e9 + 5, .body = DoneEvent{.status = DoneStatus::kFailed}},
  };
  const std::string node = writeNode(events, 1);
  const std::string spec =
      std::string(ringmaster::testSourceDir()) + "/resources/examples/single_mlp.json";
  // Every line of what a command printed is bounded: a row holding a name by a few names' bounds,
  // any line by a message's.
  auto expectBounded = [](const std::string& output, const std::string& what) {
    std::istringstream lines(output);
    for (std::string line; std::getline(lines, line);) {
      const bool holds_a_name = line.find("hhhhhhhh") != std::string::npos ||
                                line.find("dddddddd") != std::string::npos ||
                                line.find("oooooooo") != std::string::npos;
      EXPECT_LE(line.size(), holds_a_name ? 1000u : kMaxDisplayBlockChars + 100)
          << what << ": " << line.substr(0, 120);
    }
    EXPECT_LT(output.size(), 400'000u) << what;
  };
  for (int run = 0; run < 2; ++run)
    expectBounded(ringmaster({"run", "-v", spec}, node), "ringmaster run");
  {
    storage::Database db((dir_ / "runs.db").string());
    EXPECT_EQ(storage::testing::queryInt(db, "SELECT max(length(host)) FROM ranks"), 256);
    EXPECT_EQ(storage::testing::queryInt(db,
                                         "SELECT max(length(op) + length(group_name)) FROM "
                                         "comm_events"),
              512);
    EXPECT_EQ(storage::testing::queryInt(db, "SELECT max(length(message)) FROM logs"), 65536);
    EXPECT_EQ(storage::testing::queryInt(db,
                                         "SELECT count(*) FROM logs WHERE message LIKE "
                                         "'%cut to its bound: hello.host (500000 bytes), "
                                         "hello.device_name (300000 bytes)'"),
              2);
    // What an older version stored whole.
    db.exec(fmt::format("UPDATE ranks SET host = '{}' WHERE run_id = 2", host));
    db.exec(fmt::format("UPDATE runs SET error = '{}', name = '{}' WHERE id = 2",
                        std::string(900'000, 'E'), host));
  }
  for (const std::vector<std::string>& command :
       {std::vector<std::string>{"show", "1"}, {"show", "2"}, {"runs"}, {"compare", "1", "2"}}) {
    const std::string output = ringmaster(command);
    EXPECT_TRUE(last_status_.ok()) << output.substr(0, 2000);
    expectBounded(output, "ringmaster " + command[0]);
    if (command[0] == "show")  // the host, cut to a line's bound with its mark
      EXPECT_NE(output.find(std::string(kMaxDisplayLineChars - 3, 'h') + "..."), std::string::npos)
          << output.substr(0, 3000);
  }
  const nlohmann::json shown = nlohmann::json::parse(ringmaster({"show", "1", "--json"}));
  EXPECT_EQ(shown["ranks"][0]["host"].get<std::string>(), host.substr(0, 253) + "...");
}

}  // namespace
}  // namespace ringmaster
