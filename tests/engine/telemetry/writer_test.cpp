// TelemetryWriter: concurrent emits give whole lines with strictly increasing sequence numbers; a
// closed reader makes emit return false instead of killing the process; partial writes, EINTR,
// non-blocking pipes, FILE* streams and oversized events are handled.
#include <gtest/gtest.h>

#include <fcntl.h>
#include <pthread.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <csignal>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

#include "core/error.h"
#include "sample_events.h"
#include "telemetry/codec.h"
#include "telemetry/writer.h"

namespace ringmaster {
namespace {

// A pipe whose read end a background thread drains into lines until EOF.
class PipeReader {
 public:
  PipeReader() {
    int fds[2];
    EXPECT_EQ(::pipe(fds), 0);
    read_fd_ = fds[0];
    write_fd_ = fds[1];
  }
  ~PipeReader() {
    closeWriteEnd();
    if (thread_.joinable()) thread_.join();
    if (read_fd_ >= 0) ::close(read_fd_);
  }

  int writeFd() const { return write_fd_; }
  int readFd() const { return read_fd_; }

  // Starts draining; `delay_us` between reads of `chunk` bytes makes the writer hit a full pipe.
  void start(std::size_t chunk = 65536, int delay_us = 0) {
    thread_ = std::thread([this, chunk, delay_us] {
      LineSplitter splitter;
      std::string buffer(chunk, '\0');
      for (;;) {
        ssize_t n = ::read(read_fd_, buffer.data(), buffer.size());
        if (n < 0 && errno == EINTR) continue;
        if (n <= 0) break;
        splitter.feed(std::string_view(buffer.data(), static_cast<std::size_t>(n)));
        while (auto line = splitter.next()) lines_.push_back(std::move(*line));
        if (delay_us > 0) ::usleep(delay_us);
      }
      splitter.finish();
      while (auto line = splitter.next()) lines_.push_back(std::move(*line));
    });
  }

  // Closes the write end and waits for the reader; the lines read are then complete.
  std::vector<LineSplitter::Line> finish() {
    closeWriteEnd();
    if (thread_.joinable()) thread_.join();
    return std::move(lines_);
  }

  void closeWriteEnd() {
    if (write_fd_ >= 0) ::close(write_fd_);
    write_fd_ = -1;
  }

 private:
  int read_fd_ = -1;
  int write_fd_ = -1;
  std::thread thread_;
  std::vector<LineSplitter::Line> lines_;
};

TEST(TelemetryWriter, ConcurrentEmitsNeverInterleaveAndSeqIsMonotonic) {
  constexpr int kThreads = 8;
  constexpr int kEventsPerThread = 400;
  PipeReader pipe;
  pipe.start(1000);  // small reads: the writers fill the pipe and block on it
  {
    TelemetryWriter writer(pipe.writeFd(), 5);
    std::vector<std::thread> threads;
    for (int t = 0; t < kThreads; ++t) {
      threads.emplace_back([&writer, t] {
        for (int i = 0; i < kEventsPerThread; ++i) {
          if (i % 50 == 0) {
            // Lines far above PIPE_BUF (4096), which one write() cannot make atomic by itself.
            LogEvent log;
            log.level = LogLevel::kInfo;
            log.message = std::string(20000 + t, static_cast<char>('a' + t));
            ASSERT_TRUE(writer.emit(log));
          } else {
            StepEvent step = samples::fullStep();
            step.step = t * 1'000'000 + i;
            ASSERT_TRUE(writer.emit(step));
          }
        }
      });
    }
    for (auto& thread : threads) thread.join();
    EXPECT_EQ(writer.nextSeq(), uint64_t{kThreads * kEventsPerThread});
    EXPECT_FALSE(writer.broken());
  }
  const auto lines = pipe.finish();
  ASSERT_EQ(lines.size(), std::size_t{kThreads * kEventsPerThread});

  std::vector<int64_t> last_step(kThreads, -1);
  double last_time = 0;
  for (std::size_t i = 0; i < lines.size(); ++i) {
    ASSERT_FALSE(lines[i].oversized);
    DecodeResult result = decodeEvent(lines[i].text);
    ASSERT_TRUE(result.ok()) << "line " << i << ": " << result.error().message;
    const TelemetryEvent& event = result.event();
    EXPECT_EQ(event.rank, 5);
    EXPECT_EQ(event.seq, i) << "the stream is in sequence order, from 0, without gaps";
    EXPECT_GE(event.time, last_time - 1.0);  // the wall clock may step, but not by much here
    last_time = event.time;
    if (const auto* step = std::get_if<StepEvent>(&event.body)) {
      const int thread = static_cast<int>(step->step / 1'000'000);
      EXPECT_GT(step->step, last_step[thread]) << "each thread's events keep their order";
      last_step[thread] = step->step;
    } else {
      const auto& log = std::get<LogEvent>(event.body);
      ASSERT_FALSE(log.message.empty());
      const int thread = log.message[0] - 'a';
      EXPECT_EQ(log.message, std::string(20000 + thread, log.message[0]));
    }
  }
}

TEST(TelemetryWriter, StampsRankSeqAndWallClock) {
  PipeReader pipe;
  pipe.start();
  const double before = telemetryNow();
  {
    TelemetryWriter writer(pipe.writeFd(), 0);
    EXPECT_EQ(writer.rank(), 0);
    EXPECT_EQ(writer.nextSeq(), 0u);
    EXPECT_TRUE(writer.emit(samples::fullHello()));
    EXPECT_TRUE(writer.emit(samples::sampleDone()));
  }
  const double after = telemetryNow();
  const auto lines = pipe.finish();
  ASSERT_EQ(lines.size(), 2u);
  for (uint64_t i = 0; i < 2; ++i) {
    DecodeResult result = decodeEvent(lines[i].text);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(result.event().seq, i);
    EXPECT_EQ(result.event().rank, 0);
    EXPECT_GE(result.event().time, before);
    EXPECT_LE(result.event().time, after);
  }
  EXPECT_TRUE(std::holds_alternative<HelloEvent>(decodeEvent(lines[0].text).event().body));
}

TEST(TelemetryWriter, ClosedReaderReturnsFalseAndSigpipeDoesNotKill) {
  // The default disposition of SIGPIPE terminates the process: the writer must not rely on the
  // application ignoring it.
  struct sigaction previous {};
  struct sigaction default_action {};
  default_action.sa_handler = SIG_DFL;
  sigemptyset(&default_action.sa_mask);
  ASSERT_EQ(::sigaction(SIGPIPE, &default_action, &previous), 0);

  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  ::close(fds[0]);  // the reader is gone
  TelemetryWriter writer(fds[1], 1);
  EXPECT_FALSE(writer.emit(samples::sampleDone()));
  EXPECT_TRUE(writer.broken());
  EXPECT_EQ(writer.lastErrno(), EPIPE);
  EXPECT_FALSE(writer.emit(samples::sampleDone()));  // stays broken, writes nothing more
  EXPECT_EQ(writer.nextSeq(), 1u);

  sigset_t pending;
  sigemptyset(&pending);
  ASSERT_EQ(::sigpending(&pending), 0);
  EXPECT_EQ(sigismember(&pending, SIGPIPE), 0) << "the SIGPIPE was consumed";
  ::close(fds[1]);
  ASSERT_EQ(::sigaction(SIGPIPE, &previous, nullptr), 0);
}

TEST(TelemetryWriter, NonBlockingPipeWithPartialWrites) {
  PipeReader pipe;
#ifdef F_SETPIPE_SZ
  ::fcntl(pipe.writeFd(), F_SETPIPE_SZ, 4096);  // the smallest pipe: many partial writes
#endif
  const int flags = ::fcntl(pipe.writeFd(), F_GETFL);
  ASSERT_EQ(::fcntl(pipe.writeFd(), F_SETFL, flags | O_NONBLOCK), 0);
  pipe.start(512, 200);
  {
    TelemetryWriter writer(pipe.writeFd(), 2);
    LogEvent log;
    log.message = std::string(200000, 'n');
    EXPECT_TRUE(writer.emit(log));
    EXPECT_TRUE(writer.emit(samples::minimalComm()));
  }
  const auto lines = pipe.finish();
  ASSERT_EQ(lines.size(), 2u);
  DecodeResult first = decodeEvent(lines[0].text);
  ASSERT_TRUE(first.ok()) << first.error().message;
  EXPECT_EQ(std::get<LogEvent>(first.event().body).message.size(), 200000u);
  EXPECT_TRUE(decodeEvent(lines[1].text).ok());
}

std::atomic<int> g_interrupts{0};
void countInterrupt(int) {
  g_interrupts.fetch_add(1, std::memory_order_relaxed);
}

TEST(TelemetryWriter, SurvivesEintr) {
  // A handler installed without SA_RESTART makes a blocked write() return early: EINTR before any
  // byte went out, or a short count after some did.
  struct sigaction action {};
  struct sigaction previous {};
  action.sa_handler = countInterrupt;
  sigemptyset(&action.sa_mask);
  action.sa_flags = 0;
  ASSERT_EQ(::sigaction(SIGUSR1, &action, &previous), 0);

  PipeReader pipe;
#ifdef F_SETPIPE_SZ
  ::fcntl(pipe.writeFd(), F_SETPIPE_SZ, 4096);
#endif
  pipe.start(256, 100);
  std::atomic<bool> writing{true};
  pthread_t writer_thread = ::pthread_self();
  std::thread interrupter([&] {
    while (writing.load()) {
      ::pthread_kill(writer_thread, SIGUSR1);
      ::usleep(50);
    }
  });
  {
    TelemetryWriter writer(pipe.writeFd(), 0);
    for (int i = 0; i < 5; ++i) {
      LogEvent log;
      log.message = std::string(50000, static_cast<char>('0' + i));
      EXPECT_TRUE(writer.emit(log));
    }
  }
  writing.store(false);
  interrupter.join();
  const auto lines = pipe.finish();
  ASSERT_EQ(::sigaction(SIGUSR1, &previous, nullptr), 0);

  EXPECT_GT(g_interrupts.load(), 0);
  ASSERT_EQ(lines.size(), 5u);
  for (int i = 0; i < 5; ++i) {
    DecodeResult result = decodeEvent(lines[i].text);
    ASSERT_TRUE(result.ok()) << result.error().message;
    EXPECT_EQ(std::get<LogEvent>(result.event().body).message,
              std::string(50000, static_cast<char>('0' + i)));
  }
}

TEST(TelemetryWriter, FileStreamIsFlushedBeforeEachLine) {
  std::FILE* file = std::tmpfile();
  ASSERT_NE(file, nullptr);
  std::fputs("printed before\n", file);  // still in the stream's buffer
  {
    TelemetryWriter writer(file, 4);
    EXPECT_TRUE(writer.emit(samples::sampleLog()));
    std::fputs("printed between\n", file);
    EXPECT_TRUE(writer.emit(samples::sampleDone()));
  }
  std::fflush(file);
  std::rewind(file);
  std::string content;
  char buffer[4096];
  for (std::size_t n; (n = std::fread(buffer, 1, sizeof buffer, file)) > 0;)
    content.append(buffer, n);
  std::fclose(file);

  LineSplitter splitter;
  splitter.feed(content);
  std::vector<std::string> lines;
  while (auto line = splitter.next()) lines.push_back(line->text);
  ASSERT_EQ(lines.size(), 4u);
  EXPECT_EQ(lines[0], "printed before");
  EXPECT_TRUE(decodeEvent(lines[1]).ok());
  EXPECT_EQ(lines[2], "printed between");
  DecodeResult done = decodeEvent(lines[3]);
  ASSERT_TRUE(done.ok()) << done.error().message;
  EXPECT_EQ(done.event().rank, 4);
  EXPECT_EQ(done.event().seq, 1u);
}

TEST(TelemetryWriter, OversizedEventsAreCutToFit) {
  PipeReader pipe;
  pipe.start();
  {
    TelemetryWriter writer(pipe.writeFd(), 0);
    LogEvent log;
    log.message = std::string(3 * kMaxLineBytes, 'm');
    EXPECT_TRUE(writer.emit(log));

    ErrorEvent error = samples::fullError();
    error.flight_recorder = nlohmann::json::array();
    for (int i = 0; i < 40000; ++i) {
      error.flight_recorder->push_back({{"seq", i},
                                        {"op", "all_reduce"},
                                        {"state", "completed"},
                                        {"note", std::string(40, 'r')}});
    }
    EXPECT_TRUE(writer.emit(error));

    HelloEvent hello = samples::fullHello();  // nothing in a hello is cut: it is not sent
    hello.host = std::string(2 * kMaxLineBytes, 'h');
    EXPECT_FALSE(writer.emit(hello));
    EXPECT_FALSE(writer.broken());
    EXPECT_TRUE(writer.emit(samples::sampleDone()));
  }
  const auto lines = pipe.finish();
  ASSERT_EQ(lines.size(), 3u);

  DecodeResult log = decodeEvent(lines[0].text);
  ASSERT_TRUE(log.ok()) << log.error().message;
  EXPECT_NE(std::get<LogEvent>(log.event().body).message.find("[cut: "), std::string::npos);

  DecodeResult error = decodeEvent(lines[1].text);
  ASSERT_TRUE(error.ok()) << error.error().message;
  const auto& records = *std::get<ErrorEvent>(error.event().body).flight_recorder;
  ASSERT_FALSE(records.empty());
  EXPECT_LT(records.size(), 40000u);
  EXPECT_EQ(records.back()["seq"], 39999) << "the newest records are kept";

  DecodeResult done = decodeEvent(lines[2].text);
  ASSERT_TRUE(done.ok());
  EXPECT_EQ(done.event().seq, 3u) << "the event that could not be sent left a gap";
}

TEST(TelemetryWriter, RejectsBadArguments) {
  EXPECT_THROW(TelemetryWriter(-1, 0), Error);
  EXPECT_THROW(TelemetryWriter(1, -2), Error);
  EXPECT_THROW(TelemetryWriter(static_cast<std::FILE*>(nullptr), 0), Error);
}

}  // namespace
}  // namespace ringmaster
