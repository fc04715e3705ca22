// The signal handler writes to a pipe (async-signal-safe); the dump happens on a normal thread.
#include "train/flight_on_demand.h"

#include <fcntl.h>
#include <unistd.h>

#include <cerrno>

#include <fmt/format.h>

#include "comm/flight_recorder.h"
#include "core/error.h"

namespace ringmaster {

namespace {

std::atomic<int> g_wake_fd{-1};  // the pipe's write end while a FlightDumpOnSignal lives

void onSignal(int) {
  const int saved = errno;
  const int fd = g_wake_fd.load();
  if (fd >= 0) {
    const char byte = 'd';
    [[maybe_unused]] const ssize_t n = ::write(fd, &byte, 1);  // full pipe: a dump is pending
  }
  errno = saved;
}

}  // namespace

FlightDumpOnSignal::FlightDumpOnSignal(TelemetryWriter& writer, int signal)
    : writer_(writer), signal_(signal) {
  RM_ENFORCE(g_wake_fd.load() < 0, "one FlightDumpOnSignal per process");
  if (::pipe2(pipe_, O_CLOEXEC) != 0)
    RM_THROW(kIo, fmt::format("flight recorder dumps: pipe failed (errno {})", errno));
  ::fcntl(pipe_[1], F_SETFL, O_NONBLOCK);
  g_wake_fd = pipe_[1];
  struct sigaction action {};
  action.sa_handler = onSignal;
  sigemptyset(&action.sa_mask);
  action.sa_flags = SA_RESTART;
  ::sigaction(signal_, &action, &previous_);
  thread_ = std::thread([this] { loop(); });
}

FlightDumpOnSignal::~FlightDumpOnSignal() {
  ::sigaction(signal_, &previous_, nullptr);
  g_wake_fd = -1;
  stopping_ = true;
  const char byte = 's';
  [[maybe_unused]] const ssize_t n = ::write(pipe_[1], &byte, 1);
  thread_.join();
  ::close(pipe_[0]);
  ::close(pipe_[1]);
}

void FlightDumpOnSignal::loop() {
  for (;;) {
    char bytes[64];
    const ssize_t n = ::read(pipe_[0], bytes, sizeof bytes);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0 || stopping_) return;
    // Several signals that arrived together are one dump.
    nlohmann::json records = dumpRegisteredFlightRecorders();
    if (records.size() > kMaxRecords)
      records.erase(records.begin(),
                    records.begin() + static_cast<std::ptrdiff_t>(records.size() - kMaxRecords));
    writer_.emit(FlightEvent{.reason = "requested (SIGUSR1: ringmaster flight)",
                             .flight_recorder = std::move(records)});
  }
}

}  // namespace ringmaster
