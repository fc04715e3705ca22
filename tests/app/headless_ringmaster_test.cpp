// Issue 20: `ringmaster` (the command line) runs on a server without Qt's GUI libraries. Its
// dynamic dependencies name no Qt library; `runs` and `serve` (answering HTTP) work with every Qt
// library made unloadable; with no subcommand and no display it still says so; with one it becomes
// ringmaster-desktop in the same process, its options passed on unchanged.
#include <gtest/gtest.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <fmt/format.h>
#include <nlohmann/json.hpp>
#if RINGMASTER_HAVE_WEB
#include <httplib.h>
#endif

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "db/database.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using testing::CapturedProcess;

const std::string kAppDir = std::string(ringmaster::testBinaryDir()) + "/app";
const std::string kRingmaster = kAppDir + "/ringmaster";

// The variables that let Qt find a display: empty counts as unset.
const std::map<std::string, std::string> kNoDisplay = {
    {"DISPLAY", ""}, {"WAYLAND_DISPLAY", ""}, {"QT_QPA_PLATFORM", ""}};

class HeadlessRingmasterTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_headless_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "noqt");
    storage::Database create(db());  // an empty run database, as the first `ringmaster run` makes
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string db() const { return (dir_ / "runs.db").string(); }

  // An environment in which no Qt library can be loaded: a directory first on LD_LIBRARY_PATH
  // holds a file that is not a library under each Qt 6 soname, so the dynamic loader, which takes
  // the first file of the name it finds, fails on it (at start-up or at a dlopen by name).
  std::map<std::string, std::string> withoutQt() const {
    for (const char* module : {"Core", "Gui", "Widgets", "Charts", "Svg", "OpenGL", "OpenGLWidgets",
                               "DBus", "Concurrent", "Network", "XcbQpa", "Test"})
      std::ofstream(dir_ / "noqt" / fmt::format("libQt6{}.so.6", module)) << "not a library\n";
    std::string path = (dir_ / "noqt").string();
    if (const char* inherited = std::getenv("LD_LIBRARY_PATH"); inherited && *inherited)
      path += std::string(":") + inherited;
    std::map<std::string, std::string> env = kNoDisplay;
    env["LD_LIBRARY_PATH"] = path;
    return env;
  }

  fs::path dir_;
};

TEST_F(HeadlessRingmasterTest, RingmasterNeedsNoQtLibrary) {
  // ldd resolves the whole tree of DT_NEEDED entries, the libraries' own included.
  CapturedProcess ldd("/usr/bin/ldd", {kRingmaster});
  ASSERT_TRUE(ldd.wait(60s).ok()) << ldd.err();
  ASSERT_NE(ldd.out().find("libc.so"), std::string::npos) << "ldd listed nothing:\n" << ldd.out();
  EXPECT_EQ(ldd.out().find("libQt"), std::string::npos) << "ringmaster loads Qt at start-up:\n"
                                                        << ldd.out();
}

TEST_F(HeadlessRingmasterTest, RunsAnswersWhereQtCannotLoad) {
  CapturedProcess runs(kRingmaster, {"--db", db(), "runs", "--json"}, withoutQt());
  const ExitStatus status = runs.wait(60s);
  ASSERT_TRUE(status.ok()) << status.describe() << "\n" << runs.err();
  EXPECT_EQ(nlohmann::json::parse(runs.out()), nlohmann::json::array());
}

#if RINGMASTER_HAVE_WEB
TEST_F(HeadlessRingmasterTest, ServeAnswersHttpWhereQtCannotLoad) {
  fs::create_directories(dir_ / "web");
  std::ofstream(dir_ / "web" / "index.html") << "<!doctype html><title>Ringmaster</title>";
  CapturedProcess serve(
      kRingmaster,
      {"--db", db(), "serve", "--listen", "127.0.0.1:0", "--assets", (dir_ / "web").string()},
      withoutQt());
  const std::string prefix = "http://127.0.0.1:";
  ASSERT_TRUE(serve.waitForOutput(" (database", 30s)) << serve.out() << serve.err();
  const size_t at = serve.out().find(prefix);
  ASSERT_NE(at, std::string::npos) << serve.out();
  const int port = std::stoi(serve.out().substr(at + prefix.size()));

  httplib::Client client("127.0.0.1", port);
  client.set_read_timeout(10, 0);
  const httplib::Result runs = client.Get("/api/v1/runs");
  ASSERT_TRUE(runs) << httplib::to_string(runs.error());
  EXPECT_EQ(runs->status, 200) << runs->body;
  EXPECT_EQ(nlohmann::json::parse(runs->body)["runs"], nlohmann::json::array());
  const httplib::Result page = client.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);

  // Nothing loaded Qt later either (a dlopen by path would bypass LD_LIBRARY_PATH).
  std::ifstream maps(fmt::format("/proc/{}/maps", serve.pid()));
  const std::string mapped((std::istreambuf_iterator<char>(maps)), {});
  ASSERT_FALSE(mapped.empty());
  EXPECT_EQ(mapped.find("libQt"), std::string::npos);

  serve.signal(SIGINT);
  const ExitStatus status = serve.wait(30s);
  EXPECT_TRUE(status.ok()) << status.describe() << serve.err();
}
#endif

#if RINGMASTER_HAVE_GUI
TEST_F(HeadlessRingmasterTest, TheEnvironmentWithoutQtStopsAQtProgram) {
  // The control: the same environment does keep a program that links Qt from starting, so the
  // two tests above prove something.
  CapturedProcess desktop(kAppDir + "/ringmaster-desktop", {"--help"}, withoutQt());
  const ExitStatus status = desktop.wait(60s);
  EXPECT_FALSE(status.ok()) << desktop.out();
  EXPECT_NE(desktop.err().find("libQt6"), std::string::npos) << desktop.err();
}

TEST_F(HeadlessRingmasterTest, NoSubcommandWithoutADisplaySaysSo) {
  CapturedProcess ringmaster(kRingmaster, {"--db", db()}, kNoDisplay);
  const ExitStatus status = ringmaster.wait(60s);
  EXPECT_EQ(status.exit_code, 2) << status.describe();
  EXPECT_NE(ringmaster.err().find("no display (neither DISPLAY nor WAYLAND_DISPLAY is set): the "
                                  "window cannot open. Use a subcommand (ringmaster --help), or "
                                  "--launch SPEC to run a job headless."),
            std::string::npos)
      << ringmaster.err();
}

TEST_F(HeadlessRingmasterTest, AskpassWithoutADisplayReachesTheDialogProgram) {
  // `ringmaster askpass` hands over to ringmaster-askpass, which needs a display to ask.
  CapturedProcess askpass(kRingmaster, {"askpass", "Passphrase for key:"}, kNoDisplay);
  const ExitStatus status = askpass.wait(60s);
  EXPECT_EQ(status.exit_code, 1) << status.describe();
  EXPECT_NE(askpass.err().find("ringmaster-askpass: no display"), std::string::npos)
      << askpass.err();
  EXPECT_TRUE(askpass.out().empty()) << askpass.out();
}

TEST_F(HeadlessRingmasterTest, NoSubcommandWithADisplayBecomesTheDesktopWithItsOptions) {
  CapturedProcess ringmaster(kRingmaster, {"--db", db()},
                             {{"QT_QPA_PLATFORM", "offscreen"},
                              {"QT_LOGGING_RULES", "qt.qpa.*=false"},
                              {"XDG_CONFIG_HOME", (dir_ / "config").string()}});
  const std::string proc = fmt::format("/proc/{}", ringmaster.pid());
  const std::string desktop = fs::canonical(kAppDir + "/ringmaster-desktop").string();
  // The kernel names the new executable in /proc/PID/exe a moment before the new program's
  // arguments are in place (cmdline reads empty in between): wait for both.
  auto arguments = [&] {
    std::ifstream cmdline(proc + "/cmdline");
    return std::string((std::istreambuf_iterator<char>(cmdline)), {});
  };
  std::error_code ec;
  const auto deadline = std::chrono::steady_clock::now() + 60s;
  while ((fs::read_symlink(proc + "/exe", ec) != desktop || arguments().empty()) &&
         std::chrono::steady_clock::now() < deadline)
    std::this_thread::sleep_for(20ms);
  ASSERT_EQ(fs::read_symlink(proc + "/exe", ec), desktop);
  EXPECT_EQ(arguments(), desktop + '\0' + "--db" + '\0' + db() + '\0');
  ringmaster.signal(SIGKILL);
  ringmaster.wait(30s);
}
#else
TEST_F(HeadlessRingmasterTest, NoSubcommandWithoutTheGuiAsksForOne) {
  CapturedProcess ringmaster(kRingmaster, {"--db", db()}, kNoDisplay);
  const ExitStatus status = ringmaster.wait(60s);
  EXPECT_EQ(status.exit_code, 2) << status.describe();
  EXPECT_NE(ringmaster.err().find("subcommand"), std::string::npos) << ringmaster.err();
}
#endif

}  // namespace
}  // namespace ringmaster
