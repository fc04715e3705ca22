// TelemetryWriter: the worker side of the telemetry stream. It stamps each event with the rank,
// the next per-rank sequence number and the wall clock, and writes it as one line with one
// write() under a mutex, so lines from several threads never interleave. It does not own the fd.
#pragma once

#include <cstdint>
#include <cstdio>
#include <mutex>

#include "telemetry/events.h"

namespace ringmaster {

class TelemetryWriter {
 public:
  // Writes to `fd` (a pipe, a socket, a file), which stays the caller's to close.
  TelemetryWriter(int fd, int rank);
  // Writes to the descriptor of `file` (stdout for a worker). Each emit takes the stream's lock
  // and flushes its buffer first, so text printed through `file` before an event precedes it and
  // never lands inside a line.
  TelemetryWriter(std::FILE* file, int rank);

  TelemetryWriter(const TelemetryWriter&) = delete;
  TelemetryWriter& operator=(const TelemetryWriter&) = delete;

  // Stamps, encodes and writes `body` as one line ending in '\n', looping over partial writes
  // and EINTR (and waiting for a non-blocking fd to drain). Thread-safe. Returns false, without
  // throwing, when the line was not written: the reader has gone (EPIPE; SIGPIPE is blocked for
  // the write and a resulting pending SIGPIPE consumed, so it never kills the process), another
  // write error (after which every emit returns false), or an event that cannot be made to fit
  // kMaxLineBytes even after cutting its message and flight recorder. A sequence number is used
  // up either way, so the reader sees a gap where an event was lost.
  bool emit(const EventBody& body);
  // The same, stamped with `time` (seconds since the Unix epoch) instead of now: for an event
  // that describes something which ended earlier (a communication op, at its end).
  bool emit(const EventBody& body, double time);

  int rank() const { return rank_; }
  // The sequence number the next event will carry.
  uint64_t nextSeq() const;
  // True once a write failed; the errno of that failure (0 while healthy).
  bool broken() const;
  int lastErrno() const;

 private:
  std::FILE* file_ = nullptr;  // set when constructed from a FILE*
  int fd_ = -1;
  int rank_ = 0;
  mutable std::mutex mutex_;
  uint64_t next_seq_ = 0;  // guarded by mutex_
  int errno_ = 0;          // guarded by mutex_
};

// The wall clock as "t" carries it: seconds since the Unix epoch, rounded to microseconds.
double telemetryNow();

}  // namespace ringmaster
