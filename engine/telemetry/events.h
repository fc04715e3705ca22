// The telemetry events a worker sends to the desktop, one JSON line each (spec: docs/telemetry.md).
// Plain structs only: encoding and decoding live in codec.h, writing in writer.h.
#pragma once

#include <cstddef>
#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <variant>

#include <nlohmann/json.hpp>

#ifndef RINGMASTER_TELEMETRY_PROTOCOL
#error "RINGMASTER_TELEMETRY_PROTOCOL must be defined (link ringmaster::telemetry)"
#endif
#ifndef RINGMASTER_VERSION
#error "RINGMASTER_VERSION must be defined (link ringmaster::telemetry)"
#endif

namespace ringmaster {

// The protocol version this build writes in "v" and the newest it decodes.
inline constexpr int kTelemetryProtocol = RINGMASTER_TELEMETRY_PROTOCOL;
// Ringmaster's own version, sent in hello.version.
inline constexpr std::string_view kRingmasterVersion = RINGMASTER_VERSION;
// The longest line (without its '\n') a decoder or a LineSplitter accepts.
inline constexpr std::size_t kMaxLineBytes = std::size_t{1} << 20;
// The deepest nesting of JSON arrays and objects a decoder accepts (flight_recorder records).
inline constexpr int kMaxJsonDepth = 64;

// The domains of the numeric fields (docs/telemetry.md, "Numeric domains"), which both decoders
// enforce, so that every value stored survives a double and the arithmetic of storage and queries.
// Steps (and micro-second times) are integers of magnitude at most 2^53.
inline constexpr int64_t kMaxStep = int64_t{1} << 53;
// Every floating-point field is finite and of magnitude at most 1e300, so that a sum of many stays
// finite; times and durations are also >= 0.
inline constexpr double kMaxMagnitude = 1e300;
// The envelope's "t" is at most this many seconds after 1970 (the year 2286).
inline constexpr double kMaxEpochSeconds = 1e10;

// ---------------------------------------------------------------------------------------------
// Small enumerations, with their wire spelling.

enum class SchedPhase { kForward, kBackward, kWeight };  // "F", "B", "W"
enum class LogLevel { kDebug, kInfo, kWarn, kError };    // "debug", "info", ...
// "completed", "failed", "cancelled", "hung": the agent's verdict on a worker that stopped
// responding (it did not end within the grace period after SIGTERM and was killed).
enum class DoneStatus { kCompleted, kFailed, kCancelled, kHung };

std::string_view toString(SchedPhase value);
std::string_view toString(LogLevel value);
std::string_view toString(DoneStatus value);
std::optional<SchedPhase> parseSchedPhase(std::string_view name);
std::optional<LogLevel> parseLogLevel(std::string_view name);
std::optional<DoneStatus> parseDoneStatus(std::string_view name);

// The device mesh (dp x tp x pp, spec/mesh_layout.h): a mesh's sizes (hello.mesh) or one rank's
// coordinates on it (hello.coords).
struct MeshAxes {
  int dp = 0, tp = 0, pp = 0;
  bool operator==(const MeshAxes&) const = default;
};

// The mesh dimension a comm event's operation ran over (`comm.dim`): "dp", "tp", "pp", or "world"
// (a group of every rank, and every event of streams written before the field).
inline constexpr std::string_view kWorldCommDim = "world";
inline constexpr std::string_view kCommDims[] = {"dp", "tp", "pp", kWorldCommDim};
bool isCommDim(std::string_view name);

// ---------------------------------------------------------------------------------------------
// Event bodies. Times are milliseconds (double) unless the name says otherwise; memory is bytes.
// Steps count optimizer steps from 1 (Optimizer::stepCount() after the step).

// First line of every stream: who this rank is and what it runs on.
struct HelloEvent {
  int world_size = 1;
  int local_rank = 0;  // rank within its host
  std::string host;    // the host name as the worker sees it
  int64_t pid = 0;
  std::string device;                 // "cpu", "cuda:0", ...
  std::string device_name;            // "NVIDIA H100 80GB HBM3", the CPU model, ...
  uint64_t device_memory_total = 0;   // bytes; 0 when unknown
  std::string version;                // Ringmaster version of the worker (kRingmasterVersion)
  std::optional<std::string> run_id;  // the desktop's run id, when it assigned one
  std::string strategy;               // "single", "ddp", "fsdp", "pipeline"
  int attempt = 0;                    // restart attempt, 0 for the first
  // The run's device mesh (its product is world_size) and this rank's coordinates on it (each
  // below the mesh's size), where the worker knows them; absent in streams of builds before them.
  std::optional<MeshAxes> mesh;
  std::optional<MeshAxes> coords;
  bool operator==(const HelloEvent&) const = default;
};

// One completed optimizer step on this rank.
struct StepEvent {
  int64_t step = 0;
  double loss = 0;  // may be NaN / infinite (sent as null, read back as NaN)
  double lr = 0;
  int64_t samples = 0;    // samples this rank processed in this step
  double step_ms = 0;     // wall time from the previous step's end to this one's
  double compute_ms = 0;  // forward + backward + optimizer, and the trainer's work between steps
  double comm_ms = 0;     // time inside collectives, overlapped or not
  double exposed_comm_ms = 0;       // communication time not hidden behind compute
  uint64_t mem_allocated = 0;       // allocator: bytes in use at the end of the step
  uint64_t mem_peak = 0;            // allocator: peak bytes in use during the step
  uint64_t mem_reserved = 0;        // allocator: bytes held from the device, cached included
  uint64_t device_mem_used = 0;     // the device's own used bytes (all processes)
  std::optional<double> grad_norm;  // global gradient norm before clipping
  std::optional<double> accuracy;   // in [0, 1], when the task measures it
  // Tokens this rank processed in the step: samples x tokens per sample (the target's elements;
  // 1 for a classifier). Absent in streams of builds before it.
  std::optional<int64_t> tokens;
  std::optional<double> tokens_per_s;  // tokens / the step's wall time
  // Model FLOPs utilisation: training FLOPs per token x tokens_per_s over the rank's peak FLOP/s
  // (train.peak_tflops, else the device's known peak); absent when no peak is known.
  std::optional<double> mfu;
  // fp16 runs only (train.precision fp16; absent otherwise): the loss scale this step's loss
  // gradients were multiplied by, and how many steps since the previous step event (this one
  // included; 0 or 1 when every step is reported) found an inf or NaN gradient and skipped the
  // optimizer's update.
  std::optional<double> loss_scale;
  std::optional<int64_t> skipped;
  // Custom metrics ("metrics" on the wire): any other scalar a script or the trainer reports with
  // the step, by name ("train/grad_norm", "eval/acc"). A non-finite value is sent as null and read
  // back as NaN; the recorder refuses it, and names outside the bounds of custom_metrics.h, with a
  // counted warning. Absent from streams of builds before it.
  std::map<std::string, double> metrics;
  bool operator==(const StepEvent&) const = default;
};

// One collective or point-to-point operation of the communicator.
struct CommEvent {
  uint64_t seq_op = 0;  // the communicator's operation sequence number
  std::string op;       // "all_reduce", "all_gather", "send", ...
  std::string group;    // the process group's name ("world", ...)
  uint64_t bytes = 0;   // message size as nccl-tests counts it
  std::string dtype;    // "float32", ...
  double duration_ms = 0;
  double algbw_gbps = 0;          // bytes / duration, GB/s (1e9 bytes)
  double busbw_gbps = 0;          // algbw times the op's bus factor, GB/s
  std::optional<double> wait_ms;  // time spent waiting for the slowest peer
  std::optional<int64_t> step;    // the step the operation belongs to
  // Collectives (absent in streams of builds before them): microseconds on the clock aligned to
  // rank 0's when this rank took the op up (its caller had called it and its earlier ops were
  // launched; before the verify_calls exchange) and when it completed, and the group's size.
  // Storage splits duration_ms into waiting for the last rank and transfer from every member's
  // start_us (docs/telemetry.md).
  std::optional<int64_t> start_us;
  std::optional<int64_t> end_us;
  std::optional<int64_t> group_size;
  // The mesh dimension of `group` (kCommDims); "world" when the line has none.
  std::string dim = std::string(kWorldCommDim);
  bool operator==(const CommEvent&) const = default;
};

// One pipeline action (forward, backward or weight-gradient of one micro-batch on one stage).
struct SchedEvent {
  int64_t step = 0;
  int stage = 0;
  int micro_batch = 0;
  SchedPhase phase = SchedPhase::kForward;
  int64_t start_us = 0;  // microseconds on the clock aligned to rank 0's: the action was reached
  int64_t end_us = 0;    // >= start_us
  // When its input had arrived and its compute began, in [start_us, end_us]: before it the stage
  // waited for another stage. Absent: no wait was recorded (read as start_us).
  std::optional<int64_t> ready_us;
  // Of the wait [start_us, ready_us), the microseconds at its end that the input's transfer took:
  // exposed communication, not waiting for the other stage. Absent: 0.
  std::optional<int64_t> transfer_us;
  int virtual_stage = 0;  // model chunk on this rank (interleaved schedules)
  bool operator==(const SchedEvent&) const = default;
};

// One evaluation on the validation set after optimizer step `step` (train.eval_every): the loss
// averaged over every target token the ranks evaluated, the same value on every rank.
struct EvalEvent {
  int64_t step = 0;
  double val_loss = 0;    // may be NaN / infinite (sent as null, read back as NaN)
  double perplexity = 0;  // exp(val_loss); infinite (null) when that overflows
  int64_t tokens = 0;     // target tokens evaluated, all ranks together
  double eval_ms = 0;     // wall time of the evaluation on this rank
  bool operator==(const EvalEvent&) const = default;
};

struct LogEvent {
  LogLevel level = LogLevel::kInfo;
  std::string message;
  bool operator==(const LogEvent&) const = default;
};

// A failure on this rank; fatal ones are followed by done{failed} when the worker can still write.
struct ErrorEvent {
  std::string message;
  std::string kind;             // errorKindName() of a ringmaster::Error, or "exception"
  std::string where;            // "engine/comm/gloo.cpp:42"
  std::optional<int64_t> step;  // last completed step
  bool fatal = true;
  std::optional<nlohmann::json> flight_recorder;  // a JSON array of the communicator's records
  // Set by the node agent when the worker process itself ended badly.
  std::optional<std::string> host;
  std::optional<int> exit_code;       // the worker's exit code
  std::optional<std::string> signal;  // the signal that killed it: "SIGKILL"
  bool operator==(const ErrorEvent&) const = default;
};

// Last line of a stream.
struct DoneEvent {
  DoneStatus status = DoneStatus::kCompleted;
  int64_t final_step = 0;  // last completed step, 0 when none
  double wall_s = 0;       // seconds from hello to done
  bool operator==(const DoneEvent&) const = default;
};

// Where this rank is in one communicator group, sent every few seconds while the run goes (the
// live hang view): the last collective it completed and the operation it waits in, with what it
// read in the store about its peers. Peer lists are world ranks, comma-separated ("2,3").
struct ProgressEvent {
  std::string group;                        // the process group's name ("world", ...)
  double period_s = 0;                      // seconds between this rank's progress events
  std::optional<int64_t> step;              // the step in progress, when it belongs to one
  uint64_t started = 0;                     // sequence number of the last collective started
  uint64_t completed = 0;                   // ... and of the last one completed (0: none)
  std::optional<std::string> completed_op;  // the op of that last completed collective
  std::optional<std::string> op;            // the op it is in now (the oldest not completed)
  std::optional<int64_t> op_seq;            // its sequence number (collective or send/recv)
  std::optional<int64_t> peer;              // its root or peer (world rank), where it has one
  std::optional<double> waiting_ms;         // how long it has been in it
  std::optional<std::string> not_arrived;   // peers that have not started op_seq yet
  std::optional<std::string> silent;        // peers whose heartbeat stopped over a period
  bool operator==(const ProgressEvent&) const = default;
};

// The communicators' flight recorders, dumped on request (`ringmaster flight`: SIGUSR1 to the
// worker), not because anything failed.
struct FlightEvent {
  std::string reason;  // why it was dumped: "requested (SIGUSR1)"
  nlohmann::json flight_recorder = nlohmann::json::array();  // every communicator's records
  bool operator==(const FlightEvent&) const = default;
};

using EventBody = std::variant<HelloEvent, StepEvent, CommEvent, SchedEvent, LogEvent, ErrorEvent,
                               DoneEvent, EvalEvent, ProgressEvent, FlightEvent>;

// The "type" spelling of a body: "hello", "step", "comm", "sched", "log", "error", "done", "eval",
// "progress", "flight".
std::string_view eventTypeName(const EventBody& body);

// One line of a stream: the envelope every event carries, and its body.
struct TelemetryEvent {
  int rank = 0;
  uint64_t seq = 0;  // per rank, from 0, strictly increasing
  double time = 0;   // "t": seconds since the Unix epoch, microsecond precision
  EventBody body;
  bool operator==(const TelemetryEvent&) const = default;
};

}  // namespace ringmaster
