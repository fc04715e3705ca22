// TelemetryWriter: stamping, encoding, fitting a line under kMaxLineBytes, and a write loop that
// survives EINTR, partial writes and a vanished reader without SIGPIPE killing the process.
#include "telemetry/writer.h"

#include <poll.h>
#include <pthread.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cmath>
#include <csignal>
#include <ctime>
#include <string>
#include <string_view>

#include <fmt/format.h>

#include "core/error.h"
#include "telemetry/codec.h"

namespace ringmaster {
namespace {

// Writes all of `data` to `fd`; returns 0 or the errno that stopped it. SIGPIPE is blocked in
// this thread meanwhile; if the write raised one (EPIPE) it is consumed before unblocking, unless
// one was already pending before, which then stays the process's business.
int writeAll(int fd, std::string_view data) {
  sigset_t pipe_only;
  sigemptyset(&pipe_only);
  sigaddset(&pipe_only, SIGPIPE);
  sigset_t old_mask;
  pthread_sigmask(SIG_BLOCK, &pipe_only, &old_mask);
  sigset_t pending;
  sigemptyset(&pending);
  sigpending(&pending);
  const bool was_pending = sigismember(&pending, SIGPIPE) == 1;

  int error = 0;
  while (!data.empty()) {
    ssize_t written = ::write(fd, data.data(), data.size());
    if (written > 0) {
      data.remove_prefix(static_cast<std::size_t>(written));
    } else if (written == 0) {
      error = EIO;  // a zero-byte write of a non-empty buffer would loop forever
      break;
    } else if (errno == EINTR) {
      continue;
    } else if (errno == EAGAIN || errno == EWOULDBLOCK) {
      pollfd waiting{fd, POLLOUT, 0};
      while (::poll(&waiting, 1, -1) < 0 && errno == EINTR) {
      }
    } else {
      error = errno;
      break;
    }
  }

  if (error == EPIPE && !was_pending) {
    const timespec no_wait{0, 0};
    while (sigtimedwait(&pipe_only, nullptr, &no_wait) < 0 && errno == EINTR) {
    }
  }
  pthread_sigmask(SIG_SETMASK, &old_mask, nullptr);
  return error;
}

// The longest message kept when a line has to be cut to fit kMaxLineBytes.
constexpr std::size_t kCutMessageBytes = 64 * 1024;

void cutMessage(std::string& message) {
  if (message.size() <= kCutMessageBytes) return;
  const std::size_t dropped = message.size() - kCutMessageBytes;
  message.resize(kCutMessageBytes);  // a cut UTF-8 sequence is replaced by U+FFFD when encoded
  message += fmt::format(" [cut: {} more bytes]", dropped);
}

// Encodes `event`; when the line is longer than kMaxLineBytes, cuts a log or error message and
// drops the oldest flight-recorder records until it fits. Empty when it cannot fit.
std::string encodeToFit(TelemetryEvent& event) {
  std::string line = encodeEvent(event);
  if (line.size() <= kMaxLineBytes) return line;
  if (auto* log = std::get_if<LogEvent>(&event.body)) {
    cutMessage(log->message);
  } else if (auto* error = std::get_if<ErrorEvent>(&event.body)) {
    cutMessage(error->message);
  } else {
    return {};
  }
  line = encodeEvent(event);
  auto* error = std::get_if<ErrorEvent>(&event.body);
  while (line.size() > kMaxLineBytes && error && error->flight_recorder &&
         error->flight_recorder->is_array() && !error->flight_recorder->empty()) {
    auto& records = *error->flight_recorder;
    records.erase(records.begin(),
                  records.begin() + static_cast<std::ptrdiff_t>((records.size() + 1) / 2));
    line = encodeEvent(event);
  }
  return line.size() <= kMaxLineBytes ? line : std::string();
}

}  // namespace

double telemetryNow() {
  using namespace std::chrono;
  const auto micros = duration_cast<microseconds>(system_clock::now().time_since_epoch()).count();
  return static_cast<double>(micros) / 1e6;
}

TelemetryWriter::TelemetryWriter(int fd, int rank) : fd_(fd), rank_(rank) {
  RM_CHECK_ARG(fd >= 0, fmt::format("TelemetryWriter: invalid file descriptor {}", fd));
  RM_CHECK_ARG(rank >= 0, fmt::format("TelemetryWriter: invalid rank {}", rank));
}

TelemetryWriter::TelemetryWriter(std::FILE* file, int rank)
    : TelemetryWriter(file ? ::fileno(file) : -1, rank) {
  file_ = file;
}

bool TelemetryWriter::emit(const EventBody& body) {
  return emit(body, telemetryNow());
}

bool TelemetryWriter::emit(const EventBody& body, double time) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (errno_ != 0) return false;
  TelemetryEvent event{rank_, next_seq_++, std::round(time * 1e6) / 1e6, body};
  std::string line = encodeToFit(event);
  if (line.empty()) return false;
  line += '\n';

  if (file_) {
    ::flockfile(file_);
    std::fflush(file_);
  }
  const int error = writeAll(fd_, line);
  if (file_) ::funlockfile(file_);
  errno_ = error;
  return error == 0;
}

uint64_t TelemetryWriter::nextSeq() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return next_seq_;
}

bool TelemetryWriter::broken() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errno_ != 0;
}

int TelemetryWriter::lastErrno() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return errno_;
}

}  // namespace ringmaster
