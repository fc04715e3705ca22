// The live progress of `ringmaster run` as a person and as a script see it (issue 15): on a
// terminal (a pseudo-terminal opened by the test as the program's stderr) a bar redrawn in place
// that advances to 100%, its filled cells matching its step; through a pipe plain lines without a
// single escape code or carriage return; and the report on a piped stdout free of escapes either
// way; a program job without a total of steps moves a marker with each step (issue 33), and the
// last line prints once. Every process is started by PID, killed by PID after its time limit, and
// reaped.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <poll.h>
#include <pty.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <regex>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include <fmt/format.h>

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "storage/storage_test_support.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using testing::CapturedProcess;

const std::string kRingmaster = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster";
const std::string kSingleMlp =
    std::string(ringmaster::testSourceDir()) + "/resources/examples/single_mlp.json";
constexpr int kSteps = 600;
constexpr int kBarWidth = 24;  // cells of the bar (app/cli/run_command.cpp)

// What a program wrote to its terminal (stderr, a pty) and to its stdout (a pipe), and how it
// ended.
struct TerminalRun {
  std::string terminal;
  std::string out;
  int exit_code = -1;  // -1: killed by a signal
  bool timed_out = false;
};

// Runs `argv` with stderr on a new pseudo-terminal and stdout on a pipe, reading both until they
// end; after `limit` the program is killed by its PID. Always reaps it.
TerminalRun runOnTerminal(const std::vector<std::string>& argv, std::chrono::seconds limit) {
  TerminalRun run;
  int master = -1, slave = -1;
  winsize size{};
  size.ws_row = 40;
  size.ws_col = 160;
  if (::openpty(&master, &slave, nullptr, nullptr, &size) != 0) {
    ADD_FAILURE() << "openpty: " << std::strerror(errno);
    return run;
  }
  int out[2];
  if (::pipe2(out, O_CLOEXEC) != 0) {
    ADD_FAILURE() << "pipe2: " << std::strerror(errno);
    ::close(master);
    ::close(slave);
    return run;
  }
  std::vector<char*> args;
  for (const std::string& arg : argv) args.push_back(const_cast<char*>(arg.c_str()));
  args.push_back(nullptr);
  const pid_t pid = ::fork();
  if (pid == 0) {  // the child: only async-signal-safe calls until exec
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);
    const int null_in = ::open("/dev/null", O_RDONLY);
    ::dup2(null_in, STDIN_FILENO);
    ::dup2(out[1], STDOUT_FILENO);
    ::dup2(slave, STDERR_FILENO);
    ::close(master);
    ::execv(args[0], args.data());
    ::_exit(127);
  }
  ::close(slave);
  ::close(out[1]);
  if (pid < 0) {
    ADD_FAILURE() << "fork: " << std::strerror(errno);
    ::close(master);
    ::close(out[0]);
    return run;
  }
  const auto deadline = std::chrono::steady_clock::now() + limit;
  int fds[2] = {master, out[0]};
  std::string* sinks[2] = {&run.terminal, &run.out};
  while (fds[0] >= 0 || fds[1] >= 0) {
    if (!run.timed_out && std::chrono::steady_clock::now() > deadline) {
      ::kill(pid, SIGKILL);
      run.timed_out = true;
    }
    pollfd polled[2] = {{fds[0], POLLIN, 0}, {fds[1], POLLIN, 0}};
    if (::poll(polled, 2, 100) < 0 && errno != EINTR) break;
    for (int i = 0; i < 2; ++i) {
      if (fds[i] < 0 || (polled[i].revents & (POLLIN | POLLHUP | POLLERR)) == 0) continue;
      char buffer[65536];
      const ssize_t n = ::read(fds[i], buffer, sizeof buffer);
      if (n > 0) {
        sinks[i]->append(buffer, static_cast<size_t>(n));
      } else if (n == 0 || errno != EINTR) {  // a pty master reads EIO once the slave is closed
        ::close(fds[i]);
        fds[i] = -1;
      }
    }
  }
  int status = 0;
  while (::waitpid(pid, &status, 0) < 0 && errno == EINTR) {
  }
  if (WIFEXITED(status)) run.exit_code = WEXITSTATUS(status);
  return run;
}

// One drawing of the bar: "[###---...] NN%  step S/T ..." after "\r\x1b[K".
struct BarFrame {
  int filled = 0;    // '#' cells
  int percent = 0;   // the percentage shown
  int64_t step = 0;  // S of "step S/T"
  int64_t total = 0;
};

std::vector<BarFrame> barFrames(const std::string& terminal) {
  static const std::regex kFrame(R"(\r\x1b\[K\[([#-]{24})\] +(\d+)%  step (\d+)/(\d+))");
  std::vector<BarFrame> frames;
  for (auto it = std::sregex_iterator(terminal.begin(), terminal.end(), kFrame);
       it != std::sregex_iterator(); ++it) {
    const std::string cells = (*it)[1];
    BarFrame frame;
    frame.filled = static_cast<int>(cells.find_first_not_of('#') == std::string::npos
                                        ? cells.size()
                                        : cells.find_first_not_of('#'));
    // The '#' cells come first and the '-' cells after them, never mixed.
    EXPECT_EQ(cells.find('#', static_cast<size_t>(frame.filled)), std::string::npos) << cells;
    frame.percent = std::stoi((*it)[2]);
    frame.step = std::stoll((*it)[3]);
    frame.total = std::stoll((*it)[4]);
    frames.push_back(frame);
  }
  return frames;
}

class ProgressBar : public storage::testing::StorageTest {
 protected:
  std::vector<std::string> runArgs() const {
    return {"--db",  (dir_ / "runs.db").string(),
            "run",   kSingleMlp,
            "--set", "train.steps=" + std::to_string(kSteps),
            "--set", "telemetry.every_steps=1"};
  }
};

TEST_F(ProgressBar, OnATerminalTheBarIsRedrawnInPlaceAndAdvancesTo100Percent) {
  std::vector<std::string> argv = runArgs();
  argv.insert(argv.begin(), kRingmaster);
  const TerminalRun run = runOnTerminal(argv, 240s);
  ASSERT_FALSE(run.timed_out) << run.terminal;
  ASSERT_EQ(run.exit_code, 0) << run.terminal;

  const std::vector<BarFrame> frames = barFrames(run.terminal);
  ASSERT_GE(frames.size(), 3u) << "the bar was not drawn on the terminal:\n" << run.terminal;
  int64_t previous_step = -1;
  int intermediate = 0;
  for (const BarFrame& frame : frames) {
    SCOPED_TRACE("step " + std::to_string(frame.step));
    EXPECT_EQ(frame.total, kSteps);
    EXPECT_GE(frame.step, previous_step) << "the bar went backwards";
    previous_step = frame.step;
    // The cells and the percentage both say how far the run is.
    const double fraction = static_cast<double>(frame.step) / kSteps;
    EXPECT_EQ(frame.filled, static_cast<int>(fraction * kBarWidth));
    EXPECT_NEAR(frame.percent, fraction * 100, 0.5 + 1e-9);
    if (frame.step > 0 && frame.step < kSteps) ++intermediate;
  }
  EXPECT_GE(intermediate, 1) << "no drawing between the first step and the last";
  EXPECT_LT(frames.front().step, frames.back().step) << "the bar did not advance";
  EXPECT_EQ(frames.back().step, kSteps);
  EXPECT_EQ(frames.back().percent, 100);
  EXPECT_EQ(frames.back().filled, kBarWidth);
  // The bar is redrawn in place, never scrolled: no newline between two drawings of it.
  const size_t first = run.terminal.find("\r\x1b[K[");
  const size_t last = run.terminal.rfind("\r\x1b[K[");
  EXPECT_EQ(run.terminal.substr(first, last - first).find('\n'), std::string::npos);

  // The report went to stdout, a pipe: no colour or other escape there.
  EXPECT_NE(run.out.find("completed"), std::string::npos) << run.out;
  EXPECT_EQ(run.out.find('\x1b'), std::string::npos) << run.out;
}

TEST_F(ProgressBar, ThroughAPipeProgressIsPlainLinesWithoutEscapes) {
  CapturedProcess run(kRingmaster, runArgs(), {{"TERM", "xterm-256color"}});
  const ExitStatus status = run.wait(240s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  EXPECT_EQ(run.err().find('\x1b'), std::string::npos) << run.err();
  EXPECT_EQ(run.err().find('\r'), std::string::npos) << run.err();
  EXPECT_EQ(run.out().find('\x1b'), std::string::npos) << run.out();
  // The last progress line still says where the run ended.
  EXPECT_NE(run.err().find(fmt::format("100%  step {}/{}", kSteps, kSteps)), std::string::npos)
      << run.err();
  EXPECT_NE(run.out().find("completed"), std::string::npos) << run.out();
  // The final line prints once (issue 33: it came twice, the last periodic line and the end's).
  const std::string last = fmt::format("100%  step {}/{}", kSteps, kSteps);
  EXPECT_EQ(run.err().find(last), run.err().rfind(last)) << run.err();
}

// Issue 33: a program job whose spec does not say how many steps its script logs. Without a
// total the bar cannot fill; a marker moves one cell with every logged step instead (it stood at
// 0% with "step 3/0" and "ETA 0.0 s"), and the last line prints once.
class ProgramProgress : public ProgressBar {
 protected:
  static constexpr int kLoggedSteps = 6;
  std::vector<std::string> programArgs() {
    std::filesystem::create_directories(dir_);
    const std::filesystem::path script = dir_ / "steps.py";
    std::ofstream(script) << fmt::format(
        "import time, ringmaster\nringmaster.init()\nfor step in range(1, {}):\n"
        "    time.sleep(0.3)\n    ringmaster.log(step, loss=1.0 / step, samples=8)\n",
        kLoggedSteps + 1);
    const std::filesystem::path spec = dir_ / "steps.json";
    std::ofstream(spec) << fmt::format(
        R"({{"name": "steps", "program": {{"python": "/usr/bin/python3", "script": "{}"}},
            "launch": {{"hosts": [{{"host": "localhost", "ranks": 1}}]}}}})",
        script.string());
    return {kRingmaster, "--db", (dir_ / "runs.db").string(), "run", spec.string()};
  }
};

TEST_F(ProgramProgress, WithoutATotalAMarkerMovesWithEveryStepAndTheLastLinePrintsOnce) {
  const TerminalRun run = runOnTerminal(programArgs(), 120s);
  ASSERT_FALSE(run.timed_out) << run.terminal;
  ASSERT_EQ(run.exit_code, 0) << run.terminal;
  static const std::regex kMarkerFrame(R"(\r\x1b\[K\[(-*)===(-*)\]  step (\d+)  )");
  std::vector<int64_t> steps;
  for (auto it = std::sregex_iterator(run.terminal.begin(), run.terminal.end(), kMarkerFrame);
       it != std::sregex_iterator(); ++it) {
    const int64_t step = std::stoll((*it)[3]);
    SCOPED_TRACE("step " + std::to_string(step));
    // The marker stands at the step's cell, the bar as wide as ever.
    EXPECT_EQ(static_cast<int64_t>((*it)[1].length()), step % (kBarWidth - 3 + 1));
    EXPECT_EQ((*it)[1].length() + 3 + (*it)[2].length(), size_t{kBarWidth});
    if (!steps.empty()) EXPECT_GE(step, steps.back()) << "the marker went backwards";
    steps.push_back(step);
  }
  ASSERT_FALSE(steps.empty()) << run.terminal;
  EXPECT_EQ(steps.back(), kLoggedSteps);
  // It moved: several steps were drawn, each once (a line is never drawn twice).
  EXPECT_GE(std::set<int64_t>(steps.begin(), steps.end()).size(), 3u) << run.terminal;
  EXPECT_EQ(std::set<int64_t>(steps.begin(), steps.end()).size(), steps.size()) << run.terminal;
  // No fraction and no ETA for a total that is not known; the last drawing stays, ended by a
  // newline.
  EXPECT_EQ(run.terminal.find("%  step"), std::string::npos) << run.terminal;
  EXPECT_EQ(run.terminal.find("ETA"), std::string::npos) << run.terminal;
  const std::string last = fmt::format("  step {}  ", kLoggedSteps);
  const size_t last_frame = run.terminal.rfind("\r\x1b[K[");
  ASSERT_NE(last_frame, std::string::npos);
  EXPECT_NE(run.terminal.find(last, last_frame), std::string::npos) << run.terminal;
  EXPECT_NE(run.terminal.find('\n', last_frame), std::string::npos) << run.terminal;
}

TEST_F(ProgramProgress, ThroughAPipeEachLineIsNewAndTheLastPrintsOnce) {
  std::vector<std::string> argv = programArgs();
  const std::string program = argv.front();
  argv.erase(argv.begin());
  CapturedProcess run(program, argv);
  const ExitStatus status = run.wait(120s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.err();
  std::istringstream in(run.err());
  std::vector<std::string> lines;
  for (std::string line; std::getline(in, line);) {
    if (!lines.empty()) EXPECT_NE(line, lines.back()) << "a line printed twice:\n" << run.err();
    lines.push_back(line);
  }
  const std::string last = fmt::format("step {}  loss", kLoggedSteps);
  EXPECT_NE(run.err().find(last), std::string::npos) << run.err();
  EXPECT_EQ(run.err().find(last), run.err().rfind(last)) << run.err();
  EXPECT_EQ(run.err().find("%  step"), std::string::npos) << run.err();
}

}  // namespace
}  // namespace ringmaster
