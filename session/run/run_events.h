// The machine-readable channel of a run session (`ringmaster run --events FILE`): one JSON object
// a line, so that a process watching a run it started (the window) reads the run's id and how it
// ends instead of parsing the command's human output. Documented in session/README.md.
#pragma once

#include <cstdint>
#include <cstdio>
#include <optional>
#include <string>
#include <string_view>

namespace ringmaster::session {

struct RunEvent {
  // "created" (run, world_size), "progress" (run, step, total_steps, ranks_started, loss),
  // "cancelling" (run), "finished" (run, status, exit_code), "error" (message: refused before a
  // run was created, or the launch failed).
  std::string event;
  int64_t run = 0;  // 0: no run was created
  int world_size = 0;
  int64_t step = 0, total_steps = 0;
  int ranks_started = 0;
  std::optional<double> loss;
  std::string status;  // "completed", "failed" or "cancelled"
  std::optional<int> exit_code;
  std::string message;
};

// One line of JSON (no '\n'), only the fields its kind carries.
std::string encodeRunEvent(const RunEvent& event);
// The event a line carries; nullopt for a line that is not one (never throws).
std::optional<RunEvent> decodeRunEvent(std::string_view line);

// Appends events to a file, each line flushed as it is written. Opening throws kIo naming the
// path; a write that fails is kept in failure() and ends the writing (the run goes on: the
// database is its record).
class RunEventWriter {
 public:
  explicit RunEventWriter(const std::string& path);
  ~RunEventWriter();
  RunEventWriter(const RunEventWriter&) = delete;
  RunEventWriter& operator=(const RunEventWriter&) = delete;

  void write(const RunEvent& event);
  const std::string& failure() const { return failure_; }

 private:
  std::string path_;
  std::FILE* file_ = nullptr;
  std::string failure_;
};

}  // namespace ringmaster::session
