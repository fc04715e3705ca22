// The telemetry codec: every event type round-trips with its optional fields present and absent,
// the wire form is what docs/telemetry.md shows, and every kind of bad line is rejected with a
// message naming the field, never with an exception or a crash.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "core/error.h"
#include "sample_events.h"
#include "telemetry/codec.h"
#include "telemetry/fast_decoder.h"
#include "telemetry/fields.h"

namespace ringmaster {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using Json = nlohmann::json;

// ---------------------------------------------------------------------------------------------
// Round trips.

TEST(TelemetryCodec, EveryEventTypeRoundTrips) {
  for (const EventBody& body : samples::allBodies()) {
    SCOPED_TRACE(std::string(eventTypeName(body)));
    const TelemetryEvent event = samples::wrap(body);
    const std::string line = encodeEvent(event);
    EXPECT_EQ(line.find('\n'), std::string::npos) << line;
    DecodeResult result = decodeEvent(line);
    ASSERT_TRUE(result.ok()) << result.error().message << "\n" << line;
    EXPECT_EQ(result.event(), event) << line;
    // Encoding what was decoded gives the same bytes back.
    EXPECT_EQ(encodeEvent(result.event()), line);
  }
}

TEST(TelemetryCodec, OptionalFieldsAreOmittedWhenAbsent) {
  const std::string full = encodeEvent(samples::wrap(samples::fullStep()));
  const std::string minimal = encodeEvent(samples::wrap(samples::minimalStep()));
  EXPECT_THAT(full, HasSubstr("\"grad_norm\":0.8125"));
  EXPECT_THAT(full, HasSubstr("\"accuracy\":0.5"));
  EXPECT_EQ(minimal.find("grad_norm"), std::string::npos);
  EXPECT_EQ(minimal.find("accuracy"), std::string::npos);

  const std::string error = encodeEvent(samples::wrap(samples::minimalError()));
  EXPECT_EQ(error.find("flight_recorder"), std::string::npos);
  EXPECT_EQ(error.find("\"step\""), std::string::npos);
  const std::string hello = encodeEvent(samples::wrap(samples::minimalHello()));
  EXPECT_EQ(hello.find("run_id"), std::string::npos);
}

// A collective's start and end on the aligned clock and its group's size (storage splits its wait
// from them) round trip through both decoders, and a comm line of a build before them decodes
// with them absent.
TEST(TelemetryCodec, ACollectivesStartEndAndGroupSizeRoundTripAndMayBeAbsent) {
  const std::string line = encodeEvent(samples::wrap(samples::fullComm()));
  EXPECT_THAT(line, HasSubstr(R"("start_us":-2500,"end_us":1700000000004200,"group_size":3)"));
  for (const std::optional<TelemetryEvent>& decoded :
       {std::optional(decodeEvent(line).event()), decodeCommonEvent(line)}) {
    ASSERT_TRUE(decoded.has_value()) << line;
    const auto& comm = std::get<CommEvent>(decoded->body);
    EXPECT_EQ(comm.start_us, -2500);
    EXPECT_EQ(comm.end_us, 1'700'000'000'004'200);
    EXPECT_EQ(comm.group_size, 3);
  }
  const std::string old_line =
      R"({"v":1,"type":"comm","rank":1,"seq":2,"t":1732320000.537035,"seq_op":1,)"
      R"("op":"all_reduce","group":"world","bytes":26214400,"dtype":"float32",)"
      R"("duration_ms":2.5,"algbw_gbps":10.486,"busbw_gbps":10.486,"step":1})";
  for (const std::optional<TelemetryEvent>& decoded :
       {std::optional(decodeEvent(old_line).event()), decodeCommonEvent(old_line)}) {
    ASSERT_TRUE(decoded.has_value()) << old_line;
    const auto& comm = std::get<CommEvent>(decoded->body);
    EXPECT_FALSE(comm.start_us || comm.end_us || comm.group_size || comm.wait_ms);
    EXPECT_EQ(comm.step, 1);
  }
  EXPECT_FALSE(decodeEvent(R"({"v":1,"type":"comm","rank":1,"seq":2,"t":1.5,"seq_op":1,"op":"x",)"
                           R"("group":"world","bytes":1,"dtype":"f","duration_ms":2.5,)"
                           R"("algbw_gbps":1,"busbw_gbps":1,"group_size":-1})")
                   .ok());
}

// Issue 34: a comm event names its mesh dimension and a hello the mesh and the rank's coordinates;
// each dimension round trips through both decoders, and lines of builds before them decode with
// the dimension "world" and no mesh.
TEST(TelemetryCodec, MeshDimensionsRoundTripAndOldLinesReadAsWorld) {
  for (const std::string_view dim : kCommDims) {
    CommEvent comm = samples::fullComm();
    comm.dim = std::string(dim);
    const std::string line = encodeEvent(samples::wrap(comm));
    EXPECT_THAT(line, HasSubstr("\"dim\":\"" + std::string(dim) + "\""));
    for (const std::optional<TelemetryEvent>& decoded :
         {std::optional(decodeEvent(line).event()), decodeCommonEvent(line)}) {
      ASSERT_TRUE(decoded.has_value()) << line;
      EXPECT_EQ(std::get<CommEvent>(decoded->body), comm);
    }
  }
  const std::string old_comm =
      R"({"v":1,"type":"comm","rank":1,"seq":2,"t":1732320000.537035,"seq_op":1,)"
      R"("op":"all_reduce","group":"world","bytes":26214400,"dtype":"float32",)"
      R"("duration_ms":2.5,"algbw_gbps":10.486,"busbw_gbps":10.486,"step":1})";
  for (const std::string& line :
       {old_comm, old_comm.substr(0, old_comm.size() - 1) + R"(,"dim":null})"}) {
    for (const std::optional<TelemetryEvent>& decoded :
         {std::optional(decodeEvent(line).event()), decodeCommonEvent(line)}) {
      ASSERT_TRUE(decoded.has_value()) << line;
      EXPECT_EQ(std::get<CommEvent>(decoded->body).dim, "world");
    }
  }

  const HelloEvent hello = samples::fullHello();
  const std::string line = encodeEvent(samples::wrap(hello));
  EXPECT_THAT(line, HasSubstr(R"("mesh":{"dp":2,"tp":2,"pp":2},"coords":{"dp":1,"tp":1,"pp":0})"));
  EXPECT_EQ(std::get<HelloEvent>(decodeEvent(line).event().body), hello);
  const std::string old_hello = encodeEvent(samples::wrap(samples::minimalHello()));
  EXPECT_EQ(old_hello.find("mesh"), std::string::npos);
  const HelloEvent decoded = std::get<HelloEvent>(decodeEvent(old_hello).event().body);
  EXPECT_FALSE(decoded.mesh || decoded.coords);
  // Every coordinate of a 1 x 2 x 4 mesh of 8 ranks is accepted, the ones past it refused.
  for (int tp = 0; tp <= 2; ++tp) {
    for (int pp = 0; pp <= 4; ++pp) {
      HelloEvent h = hello;
      h.mesh = MeshAxes{.dp = 1, .tp = 2, .pp = 4};
      h.coords = MeshAxes{.dp = 0, .tp = tp, .pp = pp};
      EXPECT_EQ(decodeEvent(encodeEvent(samples::wrap(h))).ok(), tp < 2 && pp < 4) << tp << pp;
    }
  }
}

TEST(TelemetryCodec, WireFormIsCompactAndOrdered) {
  DoneEvent done;
  done.status = DoneStatus::kCompleted;
  done.final_step = 12;
  done.wall_s = 1.5;
  EXPECT_EQ(encodeEvent(TelemetryEvent{1, 7, 1700000000.25, done}),
            R"({"v":1,"type":"done","rank":1,"seq":7,"t":1700000000.25,)"
            R"("status":"completed","final_step":12,"wall_s":1.5})");

  SchedEvent sched;
  sched.step = 1;
  sched.phase = SchedPhase::kForward;
  sched.start_us = 10;
  sched.end_us = 20;
  EXPECT_EQ(encodeEvent(TelemetryEvent{0, 0, 0.5, sched}),
            R"({"v":1,"type":"sched","rank":0,"seq":0,"t":0.5,"step":1,"stage":0,)"
            R"("micro_batch":0,"phase":"F","start_us":10,"end_us":20,"virtual_stage":0})");
}

TEST(TelemetryCodec, TimeKeepsMicroseconds) {
  TelemetryEvent event = samples::wrap(samples::sampleDone());
  event.time = 1732320000.000001;
  DecodeResult result = decodeEvent(encodeEvent(event));
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result.event().time, event.time);
  EXPECT_NEAR(result.event().time - 1732320000.0, 1e-6, 1e-7);
}

TEST(TelemetryCodec, NonFiniteLossTravelsAsNullAndComesBackAsNaN) {
  for (double loss :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    StepEvent step = samples::fullStep();
    step.loss = loss;
    const std::string line = encodeEvent(samples::wrap(step));
    EXPECT_THAT(line, HasSubstr("\"loss\":null"));
    DecodeResult result = decodeEvent(line);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_TRUE(std::isnan(std::get<StepEvent>(result.event().body).loss));
  }
}

TEST(TelemetryCodec, NullOptionalFieldMeansAbsent) {
  Json j = Json::parse(encodeEvent(samples::wrap(samples::fullStep())));
  j["grad_norm"] = nullptr;
  j["accuracy"] = nullptr;
  j["tokens"] = nullptr;
  j["tokens_per_s"] = nullptr;
  j["mfu"] = nullptr;
  j["loss_scale"] = nullptr;
  j["skipped"] = nullptr;
  DecodeResult result = decodeEvent(j.dump());
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(std::get<StepEvent>(result.event().body), samples::minimalStep());
}

TEST(TelemetryCodec, DefaultedFieldsMayBeMissing) {
  Json hello = Json::parse(encodeEvent(samples::wrap(samples::fullHello())));
  hello.erase("attempt");
  DecodeResult h = decodeEvent(hello.dump());
  ASSERT_TRUE(h.ok()) << h.error().message;
  EXPECT_EQ(std::get<HelloEvent>(h.event().body).attempt, 0);

  Json sched = Json::parse(encodeEvent(samples::wrap(samples::fullSched())));
  sched.erase("virtual_stage");
  DecodeResult s = decodeEvent(sched.dump());
  ASSERT_TRUE(s.ok()) << s.error().message;
  EXPECT_EQ(std::get<SchedEvent>(s.event().body).virtual_stage, 0);
}

TEST(TelemetryCodec, UnknownFieldsAreIgnored) {
  Json j = Json::parse(encodeEvent(samples::wrap(samples::fullComm())));
  j["future_field"] = {{"nested", {1, 2, 3}}};
  j["another"] = "x";
  DecodeResult result = decodeEvent(j.dump());
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(result.event(), samples::wrap(samples::fullComm()));
}

TEST(TelemetryCodec, FieldOrderAndWhitespaceDoNotMatter) {
  // nlohmann::json sorts keys, unlike the encoder; pretty-printing adds newlines inside.
  Json j = Json::parse(encodeEvent(samples::wrap(samples::fullError())));
  DecodeResult sorted = decodeEvent(j.dump());
  ASSERT_TRUE(sorted.ok()) << sorted.error().message;
  EXPECT_EQ(sorted.event(), samples::wrap(samples::fullError()));
  DecodeResult spaced = decodeEvent("  " + j.dump(2) + "\r\n");
  ASSERT_TRUE(spaced.ok()) << spaced.error().message;
}

TEST(TelemetryCodec, InvalidUtf8IsReplacedWhenEncoding) {
  LogEvent log;
  log.message = "bad \xff\xfe bytes";
  const std::string line = encodeEvent(samples::wrap(log));
  DecodeResult result = decodeEvent(line);
  ASSERT_TRUE(result.ok()) << result.error().message;
  EXPECT_EQ(std::get<LogEvent>(result.event().body).message, "bad \xef\xbf\xbd\xef\xbf\xbd bytes");
}

TEST(TelemetryCodec, LineOfExactlyTheLimitIsAccepted) {
  LogEvent log;
  log.message = "";
  const std::size_t overhead = encodeEvent(samples::wrap(log)).size();
  log.message.assign(kMaxLineBytes - overhead, 'a');
  std::string line = encodeEvent(samples::wrap(log));
  ASSERT_EQ(line.size(), kMaxLineBytes);
  EXPECT_TRUE(decodeEvent(line).ok());
  EXPECT_TRUE(decodeEvent(line + "\n").ok());  // the newline does not count
  log.message += 'a';
  DecodeResult over = decodeEvent(encodeEvent(samples::wrap(log)));
  ASSERT_FALSE(over.ok());
  EXPECT_EQ(over.error().message, "line is 1048577 bytes, longer than the limit of 1048576");
}

TEST(TelemetryCodec, DecodeResultAccessorsEnforceTheirSide) {
  DecodeResult bad = decodeEvent("nope");
  EXPECT_THROW(bad.event(), Error);
  DecodeResult good = decodeEvent(encodeEvent(samples::wrap(samples::sampleDone())));
  EXPECT_THROW(good.error(), Error);
}

// ---------------------------------------------------------------------------------------------
// Malformed lines, as tables: each row edits one field of a valid line (or is no line at all) and
// names the expected message; every row is rejected by the full decoder with that message and
// declined by the fast path.

struct BadLine {
  std::string name;
  std::string line;
  std::string expected;  // a substring of the error message
};

void PrintTo(const BadLine& bad, std::ostream* os) {
  *os << bad.name;
}

// `base` with `key` set to the raw JSON text `raw` (or erased when raw is empty).
std::string edit(const EventBody& base, const std::string& key, const std::string& raw) {
  Json j = Json::parse(encodeEvent(samples::wrap(base)));
  if (raw.empty()) {
    j.erase(key);
    return j.dump();
  }
  // Splice the raw text in, so that it can be something nlohmann would not write.
  j[key] = "@@RAW@@";
  std::string line = j.dump();
  line.replace(line.find("\"@@RAW@@\""), 9, raw);
  return line;
}

std::vector<BadLine> notAnObject() {
  const std::string valid = encodeEvent(samples::wrap(samples::sampleDone()));
  const auto step = samples::fullStep();
  const auto log = samples::sampleLog();
  const auto done = samples::sampleDone();
  const auto error = samples::fullError();
  return {
      {"empty", "", "empty line"},
      {"blank", " \t\r\n", "empty line"},
      {"garbage", "hello world", "malformed JSON: parse error at line 1, column 1"},
      {"truncated", valid.substr(0, valid.size() / 2), "malformed JSON"},
      {"trailing garbage", valid + "x", "malformed JSON"},
      {"two objects", valid + valid, "malformed JSON"},
      {"NaN literal", edit(step, "loss", "NaN"), "malformed JSON"},
      {"number overflow", edit(step, "lr", "1e999"), "malformed JSON"},
      {"invalid UTF-8", edit(log, "message", "\"\xc3\x28\""), "malformed JSON"},
      {"raw control char", edit(log, "message", "\"a\tb\""), "malformed JSON"},
      {"NUL byte", valid.substr(0, 5) + std::string(1, '\0') + valid.substr(5), "malformed JSON"},
      {"array", "[1,2,3]", "expected a JSON object, got an array"},
      {"string", "\"step\"", "expected a JSON object, got string \"step\""},
      {"number", "42", "expected a JSON object, got 42"},
      {"deep nesting", edit(done, "x", std::string(100000, '[') + std::string(100000, ']')),
       "JSON nested deeper than 64 levels"},
      {"deep flight recorder",
       edit(error, "flight_recorder", std::string(64, '[') + std::string(64, ']')),
       "JSON nested deeper than 64 levels"},
      {"oversized", std::string(kMaxLineBytes + 1, ' '),
       "line is 1048577 bytes, longer than the limit of 1048576"},
  };
}

std::vector<BadLine> badEnvelopes() {
  const auto done = samples::sampleDone();
  return {
      {"no v", "{}", "v: missing (not a Ringmaster telemetry line?)"},
      {"newer version", edit(done, "v", "2"), "protocol version 2 is newer than this build's 1"},
      {"huge version", edit(done, "v", "18446744073709551615"),
       "protocol version 18446744073709551615 is newer than this build's 1"},
      {"older version", edit(done, "v", "0"), "protocol version 0 is older than this build's 1"},
      {"negative version", edit(done, "v", "-3"), "protocol version -3 is older"},
      {"version string", edit(done, "v", "\"1\""), "v: expected an integer, got string \"1\""},
      {"version float", edit(done, "v", "1.0"), "v: expected an integer, got 1.0"},
      {"no type", edit(done, "type", ""), "type: missing"},
      {"type not string", edit(done, "type", "7"), "type: expected a string, got 7"},
      {"unknown type", edit(done, "type", "\"heartbeat\""),
       "type: unknown event type \"heartbeat\""},
      {"no rank", edit(done, "rank", ""), "rank: missing"},
      {"negative rank", edit(done, "rank", "-1"),
       "rank: expected an integer in [0, 2147483647], got -1"},
      {"rank overflows int", edit(done, "rank", "2147483648"), "rank: expected an integer in"},
      {"no seq", edit(done, "seq", ""), "seq: missing"},
      {"negative seq", edit(done, "seq", "-1"), "seq: expected an integer in [0, 2^63-1], got -1"},
      {"seq beyond int64 (issue 32)", edit(done, "seq", "9223372036854775808"),
       "seq: expected an integer in [0, 2^63-1], got 9223372036854775808"},
      {"seq uint64 max", edit(done, "seq", "18446744073709551615"),
       "seq: expected an integer in [0, 2^63-1], got 18446744073709551615"},
      {"seq overflows uint64", edit(done, "seq", "18446744073709551616"),
       "seq: expected an integer in [0, 2^63-1], got 1.8446744073709552e+19 (out of range)"},
      {"fractional seq", edit(done, "seq", "1.5"),
       "seq: expected an integer in [0, 2^63-1], got 1.5"},
      {"no t", edit(done, "t", ""), "t: missing"},
      {"t NaN string", edit(done, "t", "\"NaN\""),
       "t: expected a finite number, got string \"NaN\""},
      {"t null", edit(done, "t", "null"), "t: expected a finite number, got null"},
      {"t negative", edit(done, "t", "-5"), "t: expected seconds since 1970"},
      {"t after 2286", edit(done, "t", "1e11"), "t: expected a number in [0, 1e+10]"},
  };
}

// The events without a field table, and what the tables' rows below do not say: exact messages,
// cross-field rules.
std::vector<BadLine> badEventFields() {
  const auto hello = samples::fullHello();
  const auto step = samples::fullStep();
  const auto comm = samples::fullComm();
  const auto sched = samples::fullSched();
  const auto log = samples::sampleLog();
  const auto error = samples::fullError();
  const auto done = samples::sampleDone();
  return {
      // Issue 34: the mesh's sizes multiply to the world size, the coordinates lie inside it.
      {"hello mesh product", edit(hello, "mesh", R"({"dp":2,"tp":2,"pp":1})"),
       "hello.mesh: dp 2 x tp 2 x pp 1 = 4 is not world_size 8"},
      {"hello mesh tp 0", edit(hello, "mesh", R"({"dp":8,"tp":0,"pp":1})"),
       "hello.mesh.tp: expected an integer in [1, 2147483647], got 0"},
      {"hello mesh without pp", edit(hello, "mesh", R"({"dp":4,"tp":2})"),
       "hello.mesh.pp: missing"},
      {"hello mesh a list", edit(hello, "mesh", "[2,2,2]"),
       "hello.mesh: expected an object of \"dp\", \"tp\" and \"pp\", got an array"},
      {"hello coords outside", edit(hello, "coords", R"({"dp":0,"tp":2,"pp":0})"),
       "hello.coords: (dp 0, tp 2, pp 0) is outside the mesh 2 x 2 x 2"},
      {"hello coords negative", edit(hello, "coords", R"({"dp":-1,"tp":0,"pp":0})"),
       "hello.coords.dp: expected an integer in [0, 2147483647], got -1"},
      {"hello coords without mesh", edit(hello, "mesh", ""), "hello.coords: given without mesh"},
      // A comm event's dimension is one of the mesh's, or the world.
      {"comm dim unknown", edit(comm, "dim", "\"ep\""),
       "comm.dim: expected one of \"dp\", \"tp\", \"pp\", \"world\", got string \"ep\""},
      {"comm dim upper case", edit(comm, "dim", "\"DP\""), "comm.dim: expected one of"},
      {"comm dim empty", edit(comm, "dim", "\"\""), "comm.dim: expected one of"},
      {"comm dim number", edit(comm, "dim", "1"), "comm.dim: expected a string, got 1"},
      {"hello world_size 0", edit(hello, "world_size", "0"),
       "hello.world_size: expected an integer in [1, 2147483647], got 0"},
      {"hello rank beyond world", edit(hello, "rank", "8"),
       "hello.world_size: 8 is not greater than the rank 8"},
      {"hello local_rank beyond world", edit(hello, "local_rank", "9"),
       "hello.local_rank: 9 is not less than world_size 8"},
      {"hello host number", edit(hello, "host", "5"), "hello.host: expected a string, got 5"},
      {"hello no device", edit(hello, "device", ""), "hello.device: missing"},
      {"hello negative memory", edit(hello, "device_memory_total", "-1"),
       "hello.device_memory_total: expected an integer in [0, 2^63-1], got -1"},
      {"hello memory beyond int64", edit(hello, "device_memory_total", "9223372036854775808"),
       "hello.device_memory_total: expected an integer in [0, 2^63-1], got 9223372036854775808"},
      {"hello run_id number", edit(hello, "run_id", "12"),
       "hello.run_id: expected a string, got 12"},
      {"hello attempt negative", edit(hello, "attempt", "-1"),
       "hello.attempt: expected an integer"},
      {"hello version missing", edit(hello, "version", ""), "hello.version: missing"},
      {"step lr string", edit(step, "lr", "\"fast\""),
       "step.lr: expected a finite number, got string \"fast\""},
      {"step lr null", edit(step, "lr", "null"), "step.lr: expected a finite number, got null"},
      {"step loss NaN string", edit(step, "loss", "\"NaN\""),
       "step.loss: expected a number or null, got string \"NaN\""},
      {"step samples bool", edit(step, "samples", "true"),
       "step.samples: expected an integer in [0, 2^53], got true"},
      {"step grad_norm string", edit(step, "grad_norm", "\"x\""),
       "step.grad_norm: expected a finite number"},
      {"step accuracy object", edit(step, "accuracy", "{}"),
       "step.accuracy: expected a finite number, got an object"},
      {"step long string shown cut", edit(step, "lr", "\"" + std::string(100, 'z') + "\""),
       "got string \"" + std::string(40, 'z') + "\"..."},
      {"comm wait array", edit(comm, "wait_ms", "[1]"),
       "comm.wait_ms: expected a finite number, got an array"},
      {"sched bad phase", edit(sched, "phase", "\"X\""),
       "sched.phase: expected one of \"F\", \"B\", \"W\", got string \"X\""},
      {"sched phase number", edit(sched, "phase", "0"), "sched.phase: expected one of"},
      {"sched ends before start", edit(sched, "end_us", "-1501"),
       "sched.end_us: -1501 is before start_us -1500"},
      {"sched ready before start", edit(sched, "ready_us", "-1501"),
       "sched.ready_us: -1501 is outside [start_us -1500, end_us 2000000000000]"},
      {"sched ready after end", edit(sched, "ready_us", "2000000000001"),
       "sched.ready_us: 2000000000001 is outside [start_us -1500, end_us 2000000000000]"},
      {"sched ready text", edit(sched, "ready_us", "\"soon\""), "sched.ready_us: expected"},
      {"sched transfer longer than the wait", edit(sched, "transfer_us", "1001501"),
       "sched.transfer_us: 1001501 is longer than the wait from start_us to ready_us (1001500)"},
      {"log bad level", edit(log, "level", "\"fatal\""),
       "log.level: expected one of \"debug\", \"info\", \"warn\", \"error\", got string \"fatal\""},
      {"log no message", edit(log, "message", ""), "log.message: missing"},
      {"error fatal number", edit(error, "fatal", "1"),
       "error.fatal: expected true or false, got 1"},
      {"error fatal missing", edit(error, "fatal", ""), "error.fatal: missing"},
      {"error recorder object", edit(error, "flight_recorder", "{}"),
       "error.flight_recorder: expected an array, got an object"},
      {"error where missing", edit(error, "where", ""), "error.where: missing"},
      {"error step beyond 2^53", edit(error, "step", "9223372036854775807"), "error.step:"},
      {"done bad status", edit(done, "status", "\"ok\""),
       "done.status: expected one of \"completed\", \"failed\", \"cancelled\", \"hung\", got "
       "string \"ok\""},
      {"done wall_s string", edit(done, "wall_s", "\"1s\""),
       "done.wall_s: expected a finite number"},
      {"done final_step negative", edit(done, "final_step", "-1"),
       "done.final_step: expected an integer in [0, 2^53]"},
      {"done negative wall_s", edit(done, "wall_s", "-1"), "done.wall_s: expected a number in"},
  };
}

// Numeric domains (docs/telemetry.md) at their edges, with the exact words.
std::vector<BadLine> outOfDomain() {
  const auto step = samples::fullStep();
  const auto comm = samples::fullComm();
  const auto sched = samples::fullSched();
  return {
      {"step negative step", edit(step, "step", "-2"),
       "step.step: expected an integer in [0, 2^53], got -2"},
      {"step fractional step", edit(step, "step", "1.5"),
       "step.step: expected an integer in [0, 2^53], got 1.5"},
      {"step mem negative", edit(step, "mem_peak", "-5"),
       "step.mem_peak: expected an integer in [0, 2^53], got -5"},
      {"step mem beyond a double", edit(step, "mem_peak", "9007199254740993"),
       "step.mem_peak: expected an integer in [0, 2^53], got 9007199254740993"},
      {"step mem uint64 max", edit(step, "device_mem_used", "18446744073709551615"),
       "step.device_mem_used: expected an integer in [0, 2^53], got 18446744073709551615"},
      {"step mem huge", edit(step, "mem_reserved", "1e300"),
       "step.mem_reserved: expected an integer in [0, 2^53], got 1e+300 (out of range)"},
      {"step step beyond 2^53", edit(step, "step", "9007199254740993"),
       "step.step: expected an integer in [0, 2^53], got 9007199254740993"},
      {"step step int64 max", edit(step, "step", "9223372036854775807"),
       "step.step: expected an integer in [0, 2^53]"},
      {"step negative duration", edit(step, "step_ms", "-0.5"),
       "step.step_ms: expected a number in [0, 1e+300], got -0.5"},
      {"step huge lr", edit(step, "lr", "1e308"),
       "step.lr: expected a number in [-1e+300, 1e+300], got 1e+308"},
      {"step huge loss", edit(step, "loss", "-1e301"), "step.loss: expected a number in"},
      {"step accuracy above 1", edit(step, "accuracy", "1.5"),
       "step.accuracy: expected a number in [0, 1], got 1.5"},
      {"step negative grad_norm", edit(step, "grad_norm", "-1"), "step.grad_norm: expected"},
      {"comm bytes negative", edit(comm, "bytes", "-1"),
       "comm.bytes: expected an integer in [0, 2^63-1]"},
      {"comm bytes beyond int64 (issue 32)", edit(comm, "bytes", "9223372036854775808"),
       "comm.bytes: expected an integer in [0, 2^63-1], got 9223372036854775808"},
      {"comm step negative", edit(comm, "step", "-1"),
       "comm.step: expected an integer in [0, 2^53]"},
      {"comm negative duration", edit(comm, "duration_ms", "-1e-300"),
       "comm.duration_ms: expected a number in [0, 1e+300]"},
      {"comm negative wait", edit(comm, "wait_ms", "-3"), "comm.wait_ms: expected a number in"},
      {"comm negative busbw", edit(comm, "busbw_gbps", "-3"), "comm.busbw_gbps: expected"},
      {"comm step beyond 2^53", edit(comm, "step", "9007199254740993"), "comm.step: expected"},
      {"sched transfer negative", edit(sched, "transfer_us", "-1"), "sched.transfer_us: expected"},
      {"sched start overflow", edit(sched, "start_us", "9223372036854775808"),
       "sched.start_us: expected an integer in [-2^53, 2^53], got 9223372036854775808"},
      {"sched stage negative", edit(sched, "stage", "-1"),
       "sched.stage: expected an integer in [0, 2147483647]"},
      {"sched start beyond 2^53", edit(sched, "start_us", "-9007199254740993"),
       "sched.start_us: expected an integer in [-2^53, 2^53]"},
      {"sched end int64 max", edit(sched, "end_us", "9223372036854775807"),
       "sched.end_us: expected an integer in [-2^53, 2^53]"},
      {"sched transfer beyond 2^53", edit(sched, "transfer_us", "9007199254740993"),
       "sched.transfer_us: expected an integer in [0, 2^53]"},
  };
}

template <typename T>
struct Unwrapped {
  using type = T;
};
template <typename T>
struct Unwrapped<std::optional<T>> {
  using type = T;
};

// For each field of each tabled event (telemetry/fields.h): left out, a required one is missing
// (step.lr: missing); of another type, it is named ("comm.op: expected ...").
template <typename Record>
void addFieldRows(const Record& sample, std::vector<BadLine>& rows) {
  const std::string type(eventTypeName(EventBody(sample)));
  forEachField(fieldsOf<Record>(), [&](const auto& field) {
    using Member = typename std::decay_t<decltype(field)>::Value;
    const std::string name = type + "." + std::string(field.name);
    if (field.presence != Presence::kOptional)
      rows.push_back(
          {name + " missing", edit(sample, std::string(field.name), ""), name + ": missing"});
    const bool numeric = std::is_arithmetic_v<typename Unwrapped<Member>::type>;
    rows.push_back({name + " of another type",
                    edit(sample, std::string(field.name), numeric ? "\"7\"" : "[7]"),
                    name + ": expected"});
  });
}

std::vector<BadLine> fieldTableRows() {
  std::vector<BadLine> rows;
  addFieldRows(samples::fullStep(), rows);
  addFieldRows(samples::fullComm(), rows);
  addFieldRows(samples::fullSched(), rows);
  addFieldRows(samples::sampleEval(), rows);
  addFieldRows(samples::fullProgress(), rows);
  return rows;
}

std::string rowName(const testing::TestParamInfo<BadLine>& info) {
  std::string name = info.param.name;
  for (char& c : name)
    if (!std::isalnum(static_cast<unsigned char>(c))) c = '_';
  return name;
}

class MalformedLine : public testing::TestWithParam<BadLine> {};

TEST_P(MalformedLine, IsRejectedWithItsField) {
  const BadLine& bad = GetParam();
  DecodeResult result = decodeEvent(bad.line);
  ASSERT_FALSE(result.ok()) << bad.line.substr(0, 300);
  EXPECT_THAT(result.error().message, HasSubstr(bad.expected));
  EXPECT_EQ(result.error().message.find("json.exception"), std::string::npos)
      << result.error().message;
}

TEST_P(MalformedLine, IsDeclinedByTheFastPath) {
  EXPECT_FALSE(decodeCommonEvent(GetParam().line).has_value()) << GetParam().line.substr(0, 300);
}

INSTANTIATE_TEST_SUITE_P(NotAnObject, MalformedLine, testing::ValuesIn(notAnObject()), rowName);
INSTANTIATE_TEST_SUITE_P(Envelope, MalformedLine, testing::ValuesIn(badEnvelopes()), rowName);
INSTANTIATE_TEST_SUITE_P(EventFields, MalformedLine, testing::ValuesIn(badEventFields()), rowName);
INSTANTIATE_TEST_SUITE_P(OutOfDomain, MalformedLine, testing::ValuesIn(outOfDomain()), rowName);
INSTANTIATE_TEST_SUITE_P(FieldTables, MalformedLine, testing::ValuesIn(fieldTableRows()), rowName);

// Issue 33: the step's "metrics" is an object of numbers (in the domain of any signed field) or
// null; anything else rejects the line, naming the metric.
std::vector<BadLine> badMetrics() {
  const StepEvent step = samples::fullStep();
  return {
      {"metrics an array", edit(step, "metrics", "[1]"), "step.metrics: expected an object"},
      {"metrics a number", edit(step, "metrics", "7"), "step.metrics: expected an object"},
      {"metrics a string", edit(step, "metrics", R"("eval/acc")"),
       "step.metrics: expected an object"},
      {"metric a string", edit(step, "metrics", R"({"eval/acc":"0.5"})"),
       R"(step.metrics["eval/acc"]: expected a number in [-1e+300, 1e+300] or null, got string)"},
      {"metric a boolean", edit(step, "metrics", R"({"ok":true})"), R"(step.metrics["ok"])"},
      {"metric an object", edit(step, "metrics", R"({"eval":{"acc":1}})"),
       R"(step.metrics["eval"]: expected a number)"},
      {"metric too large", edit(step, "metrics", R"({"big":1e301})"),
       R"(step.metrics["big"]: expected a number in [-1e+300, 1e+300] or null, got 1e+301)"},
      {"metric too small", edit(step, "metrics", R"({"a":1,"small":-2e300})"),
       R"(step.metrics["small"])"},
  };
}
INSTANTIATE_TEST_SUITE_P(Metrics, MalformedLine, testing::ValuesIn(badMetrics()), rowName);

TEST(TelemetryCodec, ParseErrorMessagesAreAsciiOnly) {
  DecodeResult result = decodeEvent("{\"v\":1,\xff\xfe}");
  ASSERT_FALSE(result.ok());
  for (char c : result.error().message) {
    EXPECT_TRUE(c >= 0x20 && c < 0x7f) << result.error().message;
  }
}

TEST(TelemetryCodec, VersionIsCheckedBeforeTheType) {
  // A newer stream with a type this build does not know is named as newer, not as unknown.
  DecodeResult result = decodeEvent(R"({"v":2,"type":"heartbeat","rank":0,"seq":0,"t":1})");
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.error().message, "protocol version 2 is newer than this build's 1");
}

TEST(TelemetryCodec, EnumSpellingsRoundTrip) {
  for (auto phase : {SchedPhase::kForward, SchedPhase::kBackward, SchedPhase::kWeight}) {
    EXPECT_EQ(parseSchedPhase(toString(phase)), phase);
  }
  for (auto level : {LogLevel::kDebug, LogLevel::kInfo, LogLevel::kWarn, LogLevel::kError}) {
    EXPECT_EQ(parseLogLevel(toString(level)), level);
  }
  for (auto status : {DoneStatus::kCompleted, DoneStatus::kFailed, DoneStatus::kCancelled}) {
    EXPECT_EQ(parseDoneStatus(toString(status)), status);
  }
  EXPECT_FALSE(parseSchedPhase("f"));
  EXPECT_FALSE(parseLogLevel("WARN"));
  EXPECT_FALSE(parseDoneStatus(""));
}

// ---------------------------------------------------------------------------------------------
// The fast path (simdjson) agrees with the full decoder wherever it answers.

// The fast path either declines or decodes exactly what the full decoder decodes (compared
// encoded, so that a null loss, NaN, compares equal).
void expectFastPathAgrees(const std::string& line) {
  const std::optional<TelemetryEvent> fast = decodeCommonEvent(line);
  if (!fast) return;
  const DecodeResult full = decodeEventFully(line);
  ASSERT_TRUE(full.ok()) << "fast path accepted what the full decoder rejects ("
                         << full.error().message << "): " << line.substr(0, 300);
  EXPECT_EQ(encodeEvent(*fast), encodeEvent(full.event())) << line.substr(0, 300);
}

TEST(TelemetryFastPath, DecodesTheCommonEventsAsTheFullDecoderDoes) {
  std::vector<EventBody> common = {
      samples::fullStep(),    samples::minimalStep(),  samples::fullComm(),
      samples::minimalComm(), samples::fullSched(),    samples::minimalSched(),
      samples::sampleEval(),  samples::fullProgress(), samples::minimalProgress()};
  StepEvent null_loss = samples::fullStep();
  null_loss.loss = std::numeric_limits<double>::quiet_NaN();
  common.push_back(null_loss);
  EvalEvent diverged = samples::sampleEval();  // a non-finite loss and perplexity: both null
  diverged.val_loss = std::numeric_limits<double>::infinity();
  diverged.perplexity = std::numeric_limits<double>::infinity();
  common.push_back(diverged);
  for (const EventBody& body : common) {
    SCOPED_TRACE(std::string(eventTypeName(body)));
    const std::string line = encodeEvent(samples::wrap(body));
    ASSERT_TRUE(decodeCommonEvent(line).has_value()) << "the fast path declined " << line;
    expectFastPathAgrees(line);
    expectFastPathAgrees(line + "\n");
  }
}

// Issue 33: the step's custom metrics ("metrics": name -> number or null) round-trip through both
// decoders, after the step's own fields; a non-finite value travels as null and comes back as NaN;
// none is no "metrics" at all, and null or {} read as none. Names are the recorder's to check.
TEST(TelemetryCodec, CustomMetricsRoundTripThroughBothDecoders) {
  const StepEvent step = samples::stepWithMetrics();
  const std::string line = encodeEvent(samples::wrap(step));
  EXPECT_THAT(line, HasSubstr(R"("skipped":1,"metrics":{"a name the recorder refuses: )"));
  EXPECT_THAT(line, HasSubstr(R"("eval/acc":0.8125,"my_custom_thing":7.0,)"
                              R"("negative-at.the_edge":-1e+300,"train/grad_norm":0.5}})"));
  for (const auto& decoded :
       {decodeCommonEvent(line), std::optional(decodeEventFully(line).event())}) {
    ASSERT_TRUE(decoded.has_value()) << line;
    EXPECT_EQ(std::get<StepEvent>(decoded->body), step);
    EXPECT_EQ(encodeEvent(*decoded), line);
  }

  for (const double odd :
       {std::numeric_limits<double>::quiet_NaN(), std::numeric_limits<double>::infinity(),
        -std::numeric_limits<double>::infinity()}) {
    StepEvent with_odd = samples::fullStep();
    with_odd.metrics = {{"eval/acc", odd}, {"x", 1}};
    const std::string odd_line = encodeEvent(samples::wrap(with_odd));
    EXPECT_THAT(odd_line, HasSubstr(R"("metrics":{"eval/acc":null,"x":1.0})"));
    ASSERT_TRUE(decodeCommonEvent(odd_line).has_value());
    const DecodeResult decoded = decodeEvent(odd_line);  // held: event() refers into it
    const auto& metrics = std::get<StepEvent>(decoded.event().body).metrics;
    ASSERT_EQ(metrics.size(), 2u);
    EXPECT_TRUE(std::isnan(metrics.at("eval/acc")));
    expectFastPathAgrees(odd_line);
  }

  EXPECT_EQ(encodeEvent(samples::wrap(samples::fullStep())).find("metrics"), std::string::npos);
  for (const char* none : {"null", "{}"}) {
    const std::string none_line = edit(samples::fullStep(), "metrics", none);
    for (const auto& decoded :
         {decodeCommonEvent(none_line), std::optional(decodeEventFully(none_line).event())}) {
      ASSERT_TRUE(decoded.has_value()) << none_line;
      EXPECT_TRUE(std::get<StepEvent>(decoded->body).metrics.empty()) << none;
    }
  }
}

// A name given twice: the fast path leaves the line to the full decoder, which keeps one value.
TEST(TelemetryFastPath, LeavesARepeatedMetricNameToTheFullDecoder) {
  const std::string line = edit(samples::fullStep(), "metrics", R"({"a":1,"b":2,"a":3})");
  EXPECT_FALSE(decodeCommonEvent(line).has_value());
  const DecodeResult full = decodeEventFully(line);
  ASSERT_TRUE(full.ok()) << full.error().message;
  EXPECT_EQ(std::get<StepEvent>(full.event().body).metrics.size(), 2u);
}

TEST(TelemetryFastPath, LeavesEveryOtherEventToTheFullDecoder) {
  for (const EventBody& body : {EventBody(samples::fullHello()), EventBody(samples::sampleLog()),
                                EventBody(samples::fullError()), EventBody(samples::sampleDone()),
                                EventBody(samples::sampleFlight())}) {
    EXPECT_FALSE(decodeCommonEvent(encodeEvent(samples::wrap(body))).has_value())
        << eventTypeName(body);
  }
}

TEST(TelemetryFastPath, AgreesOnTheCornersOfJson) {
  const auto step = samples::fullStep();
  const auto comm = samples::fullComm();
  const auto sched = samples::fullSched();
  const std::string valid_step = encodeEvent(samples::wrap(step));
  const std::vector<std::string> lines = {
      edit(step, "mem_peak", "-0"),  // a negative zero where only non-negative integers go
      edit(step, "samples", "-0"),
      edit(step, "step", "-0"),
      edit(step, "lr", "-0"),
      edit(step, "lr", "-0.0"),
      edit(step, "lr", "1E2"),
      edit(step, "lr", "1e-05"),
      edit(step, "lr", "1e-0"),
      edit(step, "step", "1E2"),  // a float where an integer goes
      edit(step, "step", "7.0"),
      edit(step, "mem_peak", "18446744073709551615"),
      edit(step, "mem_peak", "18446744073709551616"),
      edit(step, "samples", "9223372036854775807"),
      edit(step, "samples", "9223372036854775808"),
      edit(step, "loss", "null"),
      edit(step, "grad_norm", "null"),
      edit(step, "accuracy", "[]"),
      edit(step, "x", "[[[[[[[[[[[[1]]]]]]]]]]]]"),  // deeper than the fast path reads
      edit(step, "x", "{\"y\": [1, {\"z\": null}]}"),
      edit(step, "rank", "2147483647"),
      edit(step, "t", "0"),
      edit(step, "t", "-0.0"),
      edit(step, "v", "1.0"),
      edit(step, "v", "\"1\""),
      edit(comm, "step", "null"),
      edit(comm, "op", "\"all\\u005freduce\""),  // escapes decoded the same way
      edit(comm, "dtype", "\"\\ud83d\\ude00\""),
      edit(comm, "group", "\"\\ud83d\""),  // a lone surrogate
      edit(sched, "virtual_stage", "null"),
      edit(sched, "end_us", "-1500"),
      edit(sched, "phase", "\"B\""),
      edit(sched, "ready_us", "null"),
      edit(sched, "ready_us", "-1500"),
      edit(sched, "ready_us", "-1501"),
      edit(sched, "ready_us", "2000000000000"),
      edit(sched, "transfer_us", "1001500"),
      edit(sched, "transfer_us", "1001501"),
      edit(sched, "transfer_us", "-1"),
      edit(sched, "transfer_us", "null"),
      // Repeated keys: nlohmann keeps the last.
      valid_step.substr(0, valid_step.size() - 1) + ",\"lr\":0.5}",
      valid_step.substr(0, valid_step.size() - 1) + ",\"seq\":7}",
      valid_step.substr(0, valid_step.size() - 1) + ",\"v\":1}",
      valid_step.substr(0, valid_step.size() - 1) + ",\"type\":\"comm\"}",
      // An escaped key names the same field.
      valid_step.substr(0, valid_step.size() - 1) + ",\"l\\u0072\":0.5}",
      "  " + valid_step + " \t\r\n",
      valid_step + "\n\n",
      valid_step + std::string(1, '\0'),
  };
  for (const std::string& line : lines) {
    SCOPED_TRACE(line.substr(0, 200));
    expectFastPathAgrees(line);
  }
  // It does answer for the corners that are well-formed...
  for (const std::string& line :
       {edit(step, "loss", "null"), edit(step, "lr", "-0.0"), edit(comm, "step", "null"),
        edit(comm, "algbw_gbps", "2.1505804147716916e-06"), edit(sched, "start_us", "-10"),
        edit(comm, "op", "\"all\\u005freduce\""), edit(sched, "virtual_stage", "null"),
        "  " + valid_step + " \t\r\n", edit(step, "x", "{\"y\": [1, {\"z\": null}]}")}) {
    EXPECT_TRUE(decodeCommonEvent(line).has_value()) << line;
  }
  // ... and declines a repeated key, which the full decoder resolves to the last.
  EXPECT_FALSE(
      decodeCommonEvent(valid_step.substr(0, valid_step.size() - 1) + ",\"seq\":7}").has_value());
}

// Every numeric field of every event kind with the extremes a hostile stream may send: both
// decoders answer alike, and what they accept lies in the field's domain.
TEST(TelemetryFastPath, AgreesOnTheExtremesOfEveryNumericField) {
  const std::vector<std::pair<EventBody, std::vector<const char*>>> fields = {
      {samples::fullStep(),
       {"rank", "seq", "t", "step", "loss", "lr", "samples", "step_ms", "compute_ms", "comm_ms",
        "exposed_comm_ms", "mem_allocated", "mem_peak", "mem_reserved", "device_mem_used",
        "grad_norm", "accuracy"}},
      {samples::fullComm(),
       {"seq_op", "bytes", "duration_ms", "algbw_gbps", "busbw_gbps", "wait_ms", "step"}},
      {samples::fullSched(),
       {"step", "stage", "micro_batch", "start_us", "end_us", "ready_us", "transfer_us",
        "virtual_stage"}},
      {samples::fullHello(), {"world_size", "local_rank", "pid", "device_memory_total", "attempt"}},
      {samples::fullError(), {"step", "exit_code"}},
      {samples::sampleDone(), {"final_step", "wall_s"}},
      {samples::sampleEval(), {"step", "val_loss", "perplexity", "tokens", "eval_ms"}},
      {samples::fullProgress(),
       {"period_s", "step", "started", "completed", "op_seq", "peer", "waiting_ms"}},
  };
  const std::vector<std::string>& extremes = samples::numericExtremes();
  int accepted = 0;
  for (const auto& [base, keys] : fields) {
    for (const char* key : keys) {
      for (const std::string& value : extremes) {
        const std::string line = edit(base, key, value);
        SCOPED_TRACE(std::string(eventTypeName(base)) + "." + key + " = " + value);
        expectFastPathAgrees(line);
        const DecodeResult full = decodeEventFully(line);
        if (!full.ok()) continue;
        ++accepted;
        // What is accepted stays in its domain, and encodes and decodes to itself.
        const TelemetryEvent& event = full.event();
        EXPECT_LE(event.time, kMaxEpochSeconds);
        EXPECT_FALSE(std::signbit(event.time));
        std::visit(
            [](const auto& body) {
              using Body = std::decay_t<decltype(body)>;
              if constexpr (std::is_same_v<Body, StepEvent>) {
                EXPECT_LE(body.step, kMaxStep);
                EXPECT_LE(body.samples, kMaxStep);
                for (double ms : {body.step_ms, body.compute_ms, body.comm_ms, body.exposed_comm_ms,
                                  body.grad_norm.value_or(0)}) {
                  EXPECT_TRUE(ms >= 0 && ms <= kMaxMagnitude && !std::signbit(ms)) << ms;
                }
                EXPECT_LE(std::fabs(body.lr), kMaxMagnitude);
                EXPECT_FALSE(std::fabs(body.loss) > kMaxMagnitude);  // NaN: null
                EXPECT_TRUE(body.accuracy.value_or(0) >= 0 && body.accuracy.value_or(0) <= 1);
              } else if constexpr (std::is_same_v<Body, CommEvent>) {
                EXPECT_LE(body.step.value_or(0), kMaxStep);
                for (double x : {body.duration_ms, body.algbw_gbps, body.busbw_gbps,
                                 body.wait_ms.value_or(0)}) {
                  EXPECT_TRUE(x >= 0 && x <= kMaxMagnitude && !std::signbit(x)) << x;
                }
              } else if constexpr (std::is_same_v<Body, SchedEvent>) {
                EXPECT_LE(body.step, kMaxStep);
                for (int64_t us : {body.start_us, body.end_us, body.ready_us.value_or(0),
                                   body.transfer_us.value_or(0)}) {
                  EXPECT_LE(us, kMaxStep);
                  EXPECT_GE(us, -kMaxStep);
                }
              } else if constexpr (std::is_same_v<Body, ErrorEvent>) {
                EXPECT_LE(body.step.value_or(0), kMaxStep);
              } else if constexpr (std::is_same_v<Body, EvalEvent>) {
                EXPECT_LE(body.step, kMaxStep);
                EXPECT_LE(body.tokens, kMaxStep);
                EXPECT_TRUE(body.eval_ms >= 0 && body.eval_ms <= kMaxMagnitude);
                EXPECT_FALSE(std::fabs(body.val_loss) > kMaxMagnitude);  // NaN: null
                EXPECT_FALSE(body.perplexity < 0 || body.perplexity > kMaxMagnitude);
              } else if constexpr (std::is_same_v<Body, DoneEvent>) {
                EXPECT_LE(body.final_step, kMaxStep);
                EXPECT_TRUE(body.wall_s >= 0 && body.wall_s <= kMaxMagnitude);
              }
            },
            event.body);
        const DecodeResult again = decodeEventFully(encodeEvent(event));
        ASSERT_TRUE(again.ok()) << again.error().message;
        EXPECT_EQ(encodeEvent(again.event()), encodeEvent(event));
      }
    }
  }
  EXPECT_GT(accepted, 100);  // the in-domain extremes do go through
}

}  // namespace
}  // namespace ringmaster
