// The telemetry spool of a detached run on one host: every line the agent writes (telemetry and
// log) also goes to segment files in the job directory, of a bounded size, rotated, a bounded
// number kept; a dropped segment's telemetry lines are counted per rank (with their seq range) in
// the spool's `dropped` file and said in a log line, never silently. SpoolReader follows a spool
// from its oldest segment to the agent's end, in memory bounded by kMaxSpoolRecordBytes whatever
// the files hold. No decoding of events here: the agent passes rank and seq with each line.
#pragma once

#include <cstdint>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "telemetry/codec.h"

namespace ringmaster {

// The longest spool record a reader takes: its "T " or "L " tag, a line of at most kMaxLineBytes,
// and room for the prefix the agent puts before a worker's log line ("[rank 3] ").
inline constexpr std::size_t kMaxSpoolRecordBytes = kMaxLineBytes + 4096;

struct SpoolOptions {
  std::string directory;                 // created owner-only when missing
  uint64_t segment_bytes = 64ull << 20;  // a segment is closed at this size
  int max_segments = 16;                 // the oldest is deleted beyond this many
};

// What a deleted segment held of one rank's telemetry.
struct SpoolDrop {
  int64_t lines = 0;
  uint64_t first_seq = 0, last_seq = 0;
};

// One line of a spool: telemetry (the agent's stdout) or a log line (its stderr).
struct SpoolLine {
  bool telemetry = true;
  std::string text;
};

// The spool's files in `directory`: segment-NNNNNNNN, `dropped` (one line per rank: "RANK LINES
// FIRST_SEQ LAST_SEQ"), `end` (the agent's exit code, written last).
std::string spoolSegmentPath(const std::string& directory, int64_t index);
std::map<int, SpoolDrop> readSpoolDrops(const std::string& directory);
// The agent's exit code once it wrote `end`.
std::optional<int> readSpoolEnd(const std::string& directory);

class TelemetrySpool {
 public:
  // Throws kIo when the directory or the first segment cannot be made.
  explicit TelemetrySpool(SpoolOptions options);
  ~TelemetrySpool();
  TelemetrySpool(const TelemetrySpool&) = delete;
  TelemetrySpool& operator=(const TelemetrySpool&) = delete;

  // Appends one telemetry line of `rank` (its seq when it decoded) or a log line. Returns the
  // report of a segment dropped by the rotation this append caused ("" when none), which the
  // agent also writes as a log line. A write that fails is reported once and the spool stops.
  std::string appendTelemetry(std::string_view line, std::optional<int> rank, uint64_t seq);
  std::string appendLog(std::string_view line);
  // Writes `end` with the agent's exit code: a follower stops after the lines before it.
  void finish(int exit_code);
  const std::map<int, SpoolDrop>& dropped() const { return dropped_; }

 private:
  std::string append(char kind, std::string_view line, std::optional<int> rank, uint64_t seq);
  void openSegment();
  std::string rotate();

  SpoolOptions options_;
  int fd_ = -1;
  int64_t index_ = 0;  // of the segment being written
  uint64_t bytes_ = 0;
  bool failed_ = false;
  // Per kept segment (oldest first): what it holds of each rank's telemetry.
  std::vector<std::pair<int64_t, std::map<int, SpoolDrop>>> segments_;
  std::map<int, SpoolDrop> dropped_;
};

// What a SpoolReader dropped or could not take as a record (issue 32, point 6).
struct SpoolReadCounts {
  int64_t oversized = 0;  // records longer than the limit: dropped, each said as a report line
  int64_t malformed = 0;  // lines without a "T " or "L " tag: passed on as telemetry to be refused
};

// Reads a spool from its oldest kept segment, line by line, as the agent writes it. Untrusted
// bytes (a crash's zero-filled region, a segment edited by hand) cost time linear in their size and
// memory bounded by `max_record_bytes`:
// - a record longer than the limit is dropped and said once, from the next newline on reading goes
//   on: an oversized telemetry record as oversizedLineReport words it (a launcher counts it as a
//   bad line), an oversized log record as a spool warning;
// - a line without the "T "/"L " tag (a zero-filled region shorter than the limit and the bytes
//   up to its next newline) is passed on whole as a telemetry line, which the decoder downstream
//   refuses and counts as malformed;
// - a segment's unfinished last line (only a crash leaves one) is taken as a line once the next
//   segment exists, so a region of zeros without any newline is one oversized or malformed line.
class SpoolReader {
 public:
  explicit SpoolReader(std::string directory, std::size_t max_record_bytes = kMaxSpoolRecordBytes);
  ~SpoolReader();
  SpoolReader(const SpoolReader&) = delete;
  SpoolReader& operator=(const SpoolReader&) = delete;
  // The next whole line, or nullopt when none is there yet. A segment deleted before it was read
  // (the reader fell behind the rotation) is skipped and said as a log line.
  std::optional<SpoolLine> next();
  // True once every line is read and the agent wrote its end: its exit code.
  std::optional<int> ended();
  const SpoolReadCounts& counts() const { return counts_; }

 private:
  bool openSegment(int64_t index);
  std::optional<int64_t> oldestSegment() const;
  SpoolLine lineOf(LineSplitter::Line record);

  std::string directory_;
  int fd_ = -1;
  int64_t index_ = -1;
  LineSplitter splitter_;  // the current segment's bytes, cut into records
  SpoolReadCounts counts_;
  std::vector<SpoolLine> pending_;  // reports of the reader's own
};

}  // namespace ringmaster
