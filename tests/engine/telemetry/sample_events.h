// Sample telemetry events for the tests: every type, with every optional field present ("full")
// or absent ("minimal").
#pragma once

#include <string>
#include <vector>

#include "telemetry/events.h"

namespace ringmaster::samples {

inline HelloEvent fullHello() {
  HelloEvent e;
  e.world_size = 8;
  e.local_rank = 3;
  e.host = "gpu-node-01.cluster";
  e.pid = 48213;
  e.device = "cuda:3";
  e.device_name = "NVIDIA H100 80GB HBM3";
  e.device_memory_total = 85'520'809'984ull;
  e.version = std::string(kRingmasterVersion);
  e.run_id = "run-2024-11-23-0001";
  e.strategy = "fsdp";
  e.attempt = 2;
  e.mesh = MeshAxes{.dp = 2, .tp = 2, .pp = 2};
  e.coords = MeshAxes{.dp = 1, .tp = 1, .pp = 0};  // rank 3 (wrap's)
  return e;
}

inline HelloEvent minimalHello() {
  HelloEvent e = fullHello();
  e.run_id.reset();
  e.attempt = 0;
  e.mesh.reset();
  e.coords.reset();
  return e;
}

inline StepEvent fullStep() {
  StepEvent e;
  e.step = 1234;
  e.loss = 2.3025850929940455;
  e.lr = 3e-4;
  e.samples = 64;
  e.step_ms = 41.25;
  e.compute_ms = 30.5;
  e.comm_ms = 12.125;
  e.exposed_comm_ms = 1.75;
  e.mem_allocated = 1ull << 33;
  e.mem_peak = (1ull << 34) + 17;
  e.mem_reserved = 1ull << 35;
  e.device_mem_used = 9'007'199'254'740'992ull;  // the largest a double keeps exactly: 2^53
  e.grad_norm = 0.8125;
  e.accuracy = 0.5;
  e.tokens = 64 * 1024;
  e.tokens_per_s = 1588751.515;
  e.mfu = 0.4375;
  e.loss_scale = 32768.0;
  e.skipped = 1;
  return e;
}

inline StepEvent minimalStep() {
  StepEvent e = fullStep();
  e.grad_norm.reset();
  e.accuracy.reset();
  e.tokens.reset();
  e.tokens_per_s.reset();
  e.mfu.reset();
  e.loss_scale.reset();
  e.skipped.reset();
  return e;
}

// A step with custom metrics (issue 33): names of several shapes, a negative and an extreme value.
inline StepEvent stepWithMetrics() {
  StepEvent e = fullStep();
  e.metrics = {{"train/grad_norm", 0.5},
               {"eval/acc", 0.8125},
               {"my_custom_thing", 7},
               {"negative-at.the_edge", -1e300},
               {"a name the recorder refuses: \u00e9", 1.25}};
  return e;
}

inline CommEvent fullComm() {
  CommEvent e;
  e.seq_op = 99;
  e.op = "all_reduce";
  e.group = "world";
  e.bytes = 104'857'600;
  e.dtype = "float32";
  e.duration_ms = 4.2;
  e.algbw_gbps = 24.96;
  e.busbw_gbps = 43.68;
  e.wait_ms = 0.3;
  e.step = 7;
  e.start_us = -2500;  // before rank 0's origin: legal on the aligned clock
  e.end_us = 1'700'000'000'004'200;
  e.group_size = 3;
  e.dim = "tp";
  return e;
}

inline CommEvent minimalComm() {
  CommEvent e = fullComm();
  e.wait_ms.reset();
  e.step.reset();
  e.start_us.reset();
  e.end_us.reset();
  e.group_size.reset();
  e.dim = "world";
  return e;
}

inline SchedEvent fullSched() {
  SchedEvent e;
  e.step = 5;
  e.stage = 2;
  e.micro_batch = 7;
  e.phase = SchedPhase::kBackward;
  e.start_us = -1500;  // before rank 0's origin: legal on the aligned clock
  e.end_us = 2'000'000'000'000;
  e.ready_us = 1'000'000;  // its input arrived a second after it was reached
  e.transfer_us = 250;     // the last quarter millisecond of that was the input's transfer
  e.virtual_stage = 1;
  return e;
}

inline SchedEvent minimalSched() {
  SchedEvent e = fullSched();
  e.virtual_stage = 0;
  e.ready_us.reset();
  e.transfer_us.reset();
  e.phase = SchedPhase::kWeight;
  return e;
}

inline LogEvent sampleLog() {
  LogEvent e;
  e.level = LogLevel::kWarn;
  e.message = "bucket 3 \"late\"\n\ttab, unicode: \xc3\xa9\xe2\x82\xac, nul follows: " +
              std::string(1, '\0');
  return e;
}

inline ErrorEvent fullError() {
  ErrorEvent e;
  e.message = "all_reduce timed out after 30 s";
  e.kind = "I/O error";
  e.where = "engine/comm/gloo_backend.cpp:212";
  e.step = 41;
  e.fatal = true;
  e.host = "node-7";
  e.exit_code = 1;
  e.signal = "SIGKILL";
  e.flight_recorder = nlohmann::json::array(
      {{{"seq", 17}, {"op", "all_reduce"}, {"state", "completed"}, {"ranks", {0, 1, 2}}},
       {{"seq", 18},
        {"op", "broadcast"},
        {"state", "started"},
        {"ms", 30000.5},
        {"nested", {{"a", nullptr}, {"b", false}}}}});
  return e;
}

inline ErrorEvent minimalError() {
  ErrorEvent e = fullError();
  e.step.reset();
  e.flight_recorder.reset();
  e.host.reset();
  e.exit_code.reset();
  e.signal.reset();
  e.fatal = false;
  return e;
}

inline DoneEvent sampleDone() {
  DoneEvent e;
  e.status = DoneStatus::kCancelled;
  e.final_step = 1000;
  e.wall_s = 3600.000125;
  return e;
}

inline EvalEvent sampleEval() {
  EvalEvent e;
  e.step = 500;
  e.val_loss = 1.4142135623730951;
  e.perplexity = 4.113250378782928;  // exp(val_loss)
  e.tokens = 40960;
  e.eval_ms = 812.5;
  return e;
}

inline ProgressEvent fullProgress() {
  ProgressEvent e;
  e.group = "world";
  e.period_s = 2;
  e.step = 14;
  e.started = 28;
  e.completed = 27;
  e.completed_op = "all_reduce";
  e.op = "all_reduce";
  e.op_seq = 28;
  e.peer = 1;
  e.waiting_ms = 45000.25;
  e.not_arrived = "2";
  e.silent = "2,3";
  return e;
}

// A rank between collectives: nothing in flight, so no op and no peers.
inline ProgressEvent minimalProgress() {
  ProgressEvent e;
  e.group = "dp";
  e.period_s = 2;
  e.started = 7;
  e.completed = 7;
  return e;
}

inline FlightEvent sampleFlight() {
  FlightEvent e;
  e.reason = "requested (SIGUSR1: ringmaster flight)";
  e.flight_recorder = nlohmann::json::array(
      {{{"seq", 28}, {"op", "all_reduce"}, {"group", "world"}, {"state", "started"}}});
  return e;
}

// Every body above, each once.
inline std::vector<EventBody> allBodies() {
  return {fullHello(),  minimalHello(), fullStep(),        minimalStep(),
          fullComm(),   minimalComm(),  fullSched(),       minimalSched(),
          sampleLog(),  fullError(),    minimalError(),    sampleDone(),
          sampleEval(), fullProgress(), minimalProgress(), sampleFlight()};
}

inline TelemetryEvent wrap(EventBody body, int rank = 3, uint64_t seq = 42) {
  return TelemetryEvent{rank, seq, 1732320000.123456, std::move(body)};
}

// The extremes a hostile stream tries every numeric field with, as JSON text: the edges of int64,
// uint64 and 2^53, signed zeros, the smallest and largest doubles, and overflowing numbers
// (JSON has no NaN or infinity: 1e999 is how a stream tries them).
inline const std::vector<std::string>& numericExtremes() {
  static const std::vector<std::string> kExtremes = {"-9223372036854775808",
                                                     "-9007199254740993",
                                                     "-1",
                                                     "-0",
                                                     "0",
                                                     "1",
                                                     "9007199254740992",
                                                     "9007199254740993",
                                                     "9223372036854775807",
                                                     "9223372036854775808",
                                                     "18446744073709551615",
                                                     "18446744073709551616",
                                                     "-0.0",
                                                     "0.5",
                                                     "1.5",
                                                     "1e-308",
                                                     "4.9e-324",
                                                     "1e300",
                                                     "1e301",
                                                     "1e308",
                                                     "-1e308",
                                                     "1.7976931348623157e308",
                                                     "1e999",
                                                     "-1e999",
                                                     "null"};
  return kExtremes;
}

}  // namespace ringmaster::samples
