// The web dashboard's server (issue 20) over real HTTP: every API endpoint's shape on a run
// recorded by a real `ringmaster run` (once, for the suite), every refusal (unknown run, each bad
// parameter named, path traversal, missing / wrong token), the security headers, and the event
// stream while a second real run records: coalesced `run` events, resumed after a reconnect, and a
// client that never reads dropped while the others are answered.
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <limits>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <tuple>
#include <vector>

#include <fmt/format.h>
#include <fmt/ranges.h>
#include <nlohmann/json.hpp>

#include "access.h"
#include "charts/chart_table.h"
#include "common/captured_process.h"
#include "common/own_metrics_script.h"
#include "common/test_paths.h"
#include "core/error.h"
#include "db/statement.h"
#include "query/comm_stats.h"
#include "query/run_report.h"
#include "storage/storage_test_support.h"
#include "web_server.h"

namespace ringmaster {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;
using nlohmann::json;
using storage::testing::queryInt;
using testing::CapturedProcess;
using web::WebServer;
using web::WebServerOptions;

const std::string kRingmaster = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster";
const std::string kSpec =
    std::string(ringmaster::testSourceDir()) + "/resources/examples/ddp_mlp.json";
const std::string kPipelineSpec =
    std::string(ringmaster::testSourceDir()) + "/resources/examples/pipeline_mlp.json";
constexpr int kRanks = 4;  // ddp_mlp.json, pipeline_mlp.json
constexpr char kSecret[] = "the secret outside the assets";

class WebServerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    dir_ = fs::temp_directory_path() / fmt::format("ringmaster_web_{}", getpid());
    fs::remove_all(dir_);
    fs::create_directories(dir_ / "web" / "sub");
    std::ofstream(dir_ / "web" / "index.html") << "<!doctype html><title>Ringmaster</title>";
    std::ofstream(dir_ / "web" / "app.js") << "console.log('ringmaster');";
    std::ofstream(dir_ / "web" / "sub" / "style.css") << "body { margin: 0; }";
    std::ofstream(dir_ / "secret.txt") << kSecret;
    CapturedProcess run(kRingmaster, {"--db", dbPath(), "run", kSpec, "--set", "train.steps=20",
                                      "--set", "telemetry.every_steps=1", "-q"});
    const ExitStatus status = run.wait(120s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
    {
      storage::Database db(dbPath());
      run_id_ = queryInt(db, "SELECT max(id) FROM runs");
    }
    // A pipeline run, for the measured and planned schedules.
    CapturedProcess pipeline(
        kRingmaster, {"--db", dbPath(), "run", kPipelineSpec, "--set", "train.steps=6", "--set",
                      "telemetry.every_steps=1", "-q"});
    const ExitStatus pipeline_status = pipeline.wait(120s);
    ASSERT_TRUE(pipeline_status.ok()) << pipeline_status.describe() << "\n"
                                      << pipeline.out() << pipeline.err();
    storage::Database db(dbPath());
    pipeline_run_id_ = queryInt(db, "SELECT max(id) FROM runs");
  }
  static void TearDownTestSuite() { fs::remove_all(dir_); }

  static std::string dbPath() { return (dir_ / "runs.db").string(); }

  static WebServerOptions options() {
    WebServerOptions o;
    o.db_path = dbPath();
    o.listen = {"127.0.0.1", 0};
    o.assets_dir = (dir_ / "web").string();
    return o;
  }

  void start(WebServerOptions o = options()) {
    server_ = std::make_unique<WebServer>(std::move(o));
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10, 0);
  }
  void TearDown() override {
    if (server_) server_->stop();
  }

  httplib::Result get(const std::string& path, const httplib::Headers& headers = {}) {
    return client_->Get(path.c_str(), headers);
  }
  // GET that must answer 200 with JSON.
  json getJson(const std::string& path) {
    httplib::Result res = get(path);
    EXPECT_TRUE(res) << path;
    if (!res) return json();
    EXPECT_EQ(res->status, 200) << path << ": " << res->body;
    EXPECT_EQ(res->get_header_value("Content-Type"), "application/json") << path;
    EXPECT_EQ(res->get_header_value("Cache-Control"), "no-store") << path;
    return json::parse(res->body);
  }
  // GET that must be refused with `status` and an error naming `named` first.
  void expectError(const std::string& path, int status, const std::string& named) {
    SCOPED_TRACE(path);
    httplib::Result res = get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, status) << res->body;
    const json body = json::parse(res->body, nullptr, false);
    ASSERT_TRUE(body.is_object()) << res->body;
    EXPECT_EQ(body["error"]["status"], status);
    const std::string message = body["error"]["message"];
    EXPECT_TRUE(message.starts_with(named)) << "'" << message << "' should start with " << named;
    EXPECT_FALSE(res->get_header_value("Content-Security-Policy").empty());
  }
  std::string runPath(const std::string& rest = "") {
    return fmt::format("/api/v1/runs/{}{}", run_id_, rest);
  }

  static inline fs::path dir_;
  static inline int64_t run_id_ = 0;           // ddp_mlp, 20 steps
  static inline int64_t pipeline_run_id_ = 0;  // pipeline_mlp, 6 steps
  std::unique_ptr<WebServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

// --- access rules --------------------------------------------------------------------------------

TEST(WebAccess, OnlyLoopbackAddressesGoWithoutAToken) {
  for (const char* host : {"127.0.0.1", "127.1.2.3", "::1", "::ffff:127.0.0.1"})
    EXPECT_FALSE(web::tokenRequired({host, 8765})) << host;
  for (const char* host :
       {"0.0.0.0", "::", "192.168.1.10", "10.0.0.1", "128.0.0.1", "::ffff:10.0.0.1"})
    EXPECT_TRUE(web::tokenRequired({host, 8765})) << host;
}

TEST(WebAccess, ListenAddressesParseOrAreRefusedByName) {
  EXPECT_EQ(web::parseListenAddress("127.0.0.1:9000").port, 9000);
  EXPECT_EQ(web::parseListenAddress("[::1]:80").host, "::1");
  EXPECT_EQ(web::parseListenAddress("0.0.0.0").port, 8765);
  for (const char* bad : {"", ":80", "localhost:80", "127.0.0.1:", "127.0.0.1:70000", "::1:80",
                          "[::1", "127.0.0.1:8x"}) {
    try {
      web::parseListenAddress(bad);
      ADD_FAILURE() << "accepted '" << bad << "'";
    } catch (const Error& e) {
      EXPECT_NE(std::string(e.what()).find("--listen"), std::string::npos) << e.what();
    }
  }
}

// Issue 32, point 6: the token file is read up to a bound, whatever it is.
TEST(WebAccess, ATokenFileIsReadUpToItsBoundAndNoFurther) {
  const fs::path dir = fs::temp_directory_path() / fmt::format("rm_token_{}", ::getpid());
  fs::create_directories(dir);
  std::ofstream(dir / "good") << "  abcdef0123456789abcdef  \nsecond line\n";
  EXPECT_EQ(web::readTokenFile((dir / "good").string()), "abcdef0123456789abcdef");
  std::ofstream(dir / "huge") << std::string(65 * 1024, 'a') << "\n";
  for (const std::string path : {(dir / "huge").string(), std::string("/dev/zero")}) {
    try {
      web::readTokenFile(path);
      ADD_FAILURE() << path << " was read";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument);
      EXPECT_NE(e.message().find(path), std::string::npos) << e.message();
      EXPECT_NE(e.message().find("64 KiB"), std::string::npos) << e.message();
    }
  }
  fs::remove_all(dir);
}

TEST(WebAccess, TokensCompareWholeAndGeneratedOnesAreRandomHex) {
  EXPECT_TRUE(web::constantTimeEquals("abcdef0123456789", "abcdef0123456789"));
  EXPECT_FALSE(web::constantTimeEquals("abcdef0123456788", "abcdef0123456789"));
  EXPECT_FALSE(web::constantTimeEquals("abcdef012345678", "abcdef0123456789"));
  EXPECT_FALSE(web::constantTimeEquals("", "abcdef0123456789"));
  EXPECT_FALSE(web::constantTimeEquals("abcdef0123456789abcdef0123456789", "abcdef0123456789"));
  const std::string a = web::generateToken(), b = web::generateToken();
  EXPECT_EQ(a.size(), 64u);
  EXPECT_EQ(a.find_first_not_of("0123456789abcdef"), std::string::npos);
  EXPECT_NE(a, b);
  EXPECT_EQ(web::presentedToken("Bearer abc", std::string("def")), "abc");
  EXPECT_EQ(web::presentedToken("", std::string("def")), "def");
  EXPECT_EQ(web::presentedToken("", std::nullopt), std::nullopt);
  EXPECT_EQ(web::presentedToken("", std::nullopt, "x=1; ringmaster_token=abc; y=2"), "abc");
  EXPECT_EQ(web::presentedToken("", std::nullopt, "x=1; other_token=abc"), std::nullopt);
}

TEST_F(WebServerTest, ANonLoopbackAddressWithoutATokenIsRefused) {
  WebServerOptions o = options();
  o.listen = {"0.0.0.0", 0};
  EXPECT_THROW(WebServer{o}, Error);
  o.token = web::generateToken();
  EXPECT_NO_THROW(WebServer{o});
}

TEST_F(WebServerTest, WithATokenEveryRequestNeedsItRight) {
  WebServerOptions o = options();
  const std::string token = web::generateToken();
  o.token = token;
  start(o);
  for (const std::string& path : {std::string("/api/v1/runs"), runPath(), std::string("/"),
                                  std::string("/assets/app.js"), std::string("/api/v1/stream")}) {
    SCOPED_TRACE(path);
    httplib::Result missing = get(path);
    ASSERT_TRUE(missing);
    EXPECT_EQ(missing->status, 401);
    EXPECT_EQ(json::parse(missing->body)["error"]["status"], 401);
    httplib::Result wrong = get(path, {{"Authorization", "Bearer " + std::string(64, '0')}});
    ASSERT_TRUE(wrong);
    EXPECT_EQ(wrong->status, 401);
    httplib::Result wrong_query = get(path + "?token=" + token.substr(0, 63) + "x");
    ASSERT_TRUE(wrong_query);
    EXPECT_EQ(wrong_query->status, 401);
  }
  for (const std::string& path :
       {std::string("/api/v1/runs"), runPath(), std::string("/"), std::string("/assets/app.js")}) {
    httplib::Result header = get(path, {{"Authorization", "Bearer " + token}});
    ASSERT_TRUE(header);
    EXPECT_EQ(header->status, 200) << path;
    httplib::Result query = get(path + "?token=" + token);
    ASSERT_TRUE(query);
    EXPECT_EQ(query->status, 200) << path;
  }
  // A page opened with ?token= gets the token as an HttpOnly, SameSite=Strict cookie, with which
  // its scripts and styles load (a browser fetches them without the token).
  httplib::Result page = get("/?token=" + token);
  ASSERT_TRUE(page);
  const std::string cookie = page->get_header_value("Set-Cookie");
  EXPECT_EQ(cookie, "ringmaster_token=" + token + "; HttpOnly; SameSite=Strict; Path=/");
  httplib::Result script = get("/assets/app.js", {{"Cookie", "a=1; ringmaster_token=" + token}});
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  httplib::Result bad_cookie =
      get("/assets/app.js", {{"Cookie", "ringmaster_token=" + std::string(64, 'f')}});
  ASSERT_TRUE(bad_cookie);
  EXPECT_EQ(bad_cookie->status, 401);
}

// --- `ringmaster serve` as a real process
// ---------------------------------------------------------

// A port no one listens on now.
int freePort() {
  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  bind(sock, reinterpret_cast<sockaddr*>(&address), sizeof address);
  socklen_t size = sizeof address;
  getsockname(sock, reinterpret_cast<sockaddr*>(&address), &size);
  ::close(sock);
  return ntohs(address.sin_port);
}

TEST_F(WebServerTest, ServePrintsItsUrlAnswersAndStopsCleanlyOnCtrlC) {
  const int port = freePort();
  CapturedProcess serve(kRingmaster,
                        {"--db", dbPath(), "serve", "--listen", fmt::format("127.0.0.1:{}", port),
                         "--assets", (dir_ / "web").string()});
  ASSERT_TRUE(serve.waitForOutput(fmt::format("http://127.0.0.1:{}/ ", port), 10s))
      << serve.out() << serve.err();
  EXPECT_EQ(serve.out().find("token"), std::string::npos) << "loopback needs no token";
  httplib::Client client("127.0.0.1", port);
  httplib::Result runs = client.Get("/api/v1/runs");
  ASSERT_TRUE(runs);
  EXPECT_EQ(runs->status, 200);
  EXPECT_EQ(json::parse(runs->body)["runs"].size(), 2u);
  serve.signal(SIGINT);
  const ExitStatus status = serve.wait(10s);
  EXPECT_TRUE(status.ok()) << status.describe() << serve.err();
}

// The nice value of every thread of process `pid` (field 19 of /proc/PID/task/TID/stat, counted
// after the parenthesised command name, which may hold spaces).
std::vector<int> threadNiceValues(pid_t pid) {
  std::vector<int> values;
  for (const auto& task : fs::directory_iterator(fmt::format("/proc/{}/task", pid))) {
    std::ifstream in(task.path() / "stat");
    std::string stat((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    std::istringstream fields(stat.substr(stat.rfind(')') + 2));
    std::string field;
    for (int i = 3; i <= 19 && fields >> field; ++i) {
    }
    values.push_back(std::stoi(field));
  }
  return values;
}

TEST_F(WebServerTest, ServeRunsBelowARecordingRunsPriorityUnlessToldOtherwise) {
  errno = 0;
  const int ours = getpriority(PRIO_PROCESS, 0);
  ASSERT_EQ(errno, 0);
  for (const auto& [arguments, expected] : std::vector<std::pair<std::vector<std::string>, int>>{
           {{}, std::max(ours, 10)},
           {{"--nice", "0"}, ours},
           {{"--nice", "12"}, std::max(ours, 12)}}) {
    const int port = freePort();
    std::vector<std::string> argv = {"--db", dbPath(), "serve", "--listen",
                                     fmt::format("127.0.0.1:{}", port)};
    argv.insert(argv.end(), arguments.begin(), arguments.end());
    CapturedProcess serve(kRingmaster, argv);
    ASSERT_TRUE(serve.waitForOutput("http://127.0.0.1:", 10s)) << serve.out() << serve.err();
    const std::vector<int> nice = threadNiceValues(serve.pid());
    EXPECT_GT(nice.size(), 2u) << "the server's threads exist once the URL is printed";
    for (int value : nice) EXPECT_EQ(value, expected) << fmt::format("{}", fmt::join(argv, " "));
    serve.signal(SIGINT);
    // Bounded generously: a server at a high nice value on a loaded machine gets little CPU to
    // stop its threads.
    const ExitStatus status = serve.wait(30s);
    EXPECT_TRUE(status.ok()) << status.describe() << serve.err();
  }
  CapturedProcess refused(kRingmaster, {"--db", dbPath(), "serve", "--nice", "20"});
  EXPECT_EQ(refused.wait(10s).exit_code, 2) << refused.err();
}

TEST_F(WebServerTest, ServeOnAnyAddressPrintsAGeneratedTokenOnce) {
  const int port = freePort();
  CapturedProcess serve(kRingmaster,
                        {"--db", dbPath(), "serve", "--listen", fmt::format("0.0.0.0:{}", port),
                         "--assets", (dir_ / "web").string()});
  const std::string prefix = fmt::format("http://0.0.0.0:{}/?token=", port);
  ASSERT_TRUE(serve.waitForOutput(prefix, 10s)) << serve.out() << serve.err();
  serve.readFor(200ms);
  const size_t at = serve.out().find(prefix) + prefix.size();
  const std::string token = serve.out().substr(at, 64);
  EXPECT_EQ(token.find_first_not_of("0123456789abcdef"), std::string::npos) << serve.out();
  EXPECT_EQ(serve.out().find(token, at + 64), std::string::npos) << "printed more than once";
  httplib::Client client("127.0.0.1", port);
  EXPECT_EQ(client.Get("/api/v1/runs")->status, 401);
  EXPECT_EQ(client.Get(("/api/v1/runs?token=" + token).c_str())->status, 200);
  serve.signal(SIGTERM);
  EXPECT_TRUE(serve.wait(10s).ok()) << serve.err();
}

TEST_F(WebServerTest, ASecondServerCannotTakeTheSamePort) {
  start();
  WebServerOptions o = options();
  o.listen.port = server_->port();
  WebServer second(o);
  EXPECT_THROW(second.start(), Error);  // no SO_REUSEPORT: it would share the connections
  EXPECT_EQ(get("/api/v1/runs")->status, 200);
}

// --- headers and assets --------------------------------------------------------------------------

TEST_F(WebServerTest, EveryResponseCarriesTheSecurityHeaders) {
  start();
  for (const std::string& path :
       {std::string("/"), std::string("/assets/app.js"), std::string("/api/v1/runs"),
        std::string("/api/v1/runs/999"), std::string("/nowhere")}) {
    httplib::Result res = get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->get_header_value("Content-Security-Policy"), web::kContentSecurityPolicy)
        << path;
    EXPECT_EQ(res->get_header_value("X-Content-Type-Options"), "nosniff") << path;
    EXPECT_EQ(res->get_header_value("Referrer-Policy"), "no-referrer") << path;
  }
}

TEST_F(WebServerTest, ServesTheListedAssetsOnly) {
  start();
  httplib::Result index = get("/");
  ASSERT_TRUE(index);
  EXPECT_EQ(index->status, 200);
  EXPECT_EQ(index->body, "<!doctype html><title>Ringmaster</title>");
  EXPECT_EQ(index->get_header_value("Content-Type"), "text/html; charset=utf-8");
  httplib::Result script = get("/assets/app.js");
  ASSERT_TRUE(script);
  EXPECT_EQ(script->status, 200);
  EXPECT_EQ(script->get_header_value("Content-Type"), "text/javascript; charset=utf-8");
  httplib::Result style = get("/assets/sub/style.css");
  ASSERT_TRUE(style);
  EXPECT_EQ(style->status, 200);
  EXPECT_EQ(style->get_header_value("Content-Type"), "text/css; charset=utf-8");

  // A file that appears after start-up is not in the listing.
  std::ofstream(dir_ / "web" / "late.js") << "late";
  httplib::Result late = get("/assets/late.js");
  ASSERT_TRUE(late);
  EXPECT_EQ(late->status, 404);
  fs::remove(dir_ / "web" / "late.js");
}

TEST_F(WebServerTest, PathTraversalNeverReachesTheFileSystem) {
  start();
  const std::string secret = (dir_ / "secret.txt").string();
  for (const std::string& path :
       {std::string("/assets/../secret.txt"), std::string("/assets/%2e%2e/secret.txt"),
        std::string("/assets/%2E%2E%2Fsecret.txt"), std::string("/assets/..%2fsecret.txt"),
        std::string("/assets/sub/../../secret.txt"), std::string("/assets/") + secret,
        std::string("/assets/%2F") + secret.substr(1), std::string("/assets//etc/passwd"),
        std::string("/../secret.txt"), std::string("/%2e%2e/secret.txt"),
        std::string("/assets/sub/%2e%2e/app.js"), std::string("/assets/./app.js"),
        std::string("/secret.txt"), std::string("/index.html/../secret.txt")}) {
    SCOPED_TRACE(path);
    httplib::Result res = get(path);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 404) << res->body;
    EXPECT_EQ(res->body.find(kSecret), std::string::npos);
    EXPECT_EQ(res->body.find("root:"), std::string::npos);
  }
}

// --- the API, on the recorded run ----------------------------------------------------------------

TEST_F(WebServerTest, RunsListsTheRecordedRunWithItsFiguresAndFilters) {
  start();
  const json runs = getJson("/api/v1/runs")["runs"];
  ASSERT_EQ(runs.size(), 2u);
  EXPECT_EQ(runs[0]["id"], pipeline_run_id_);  // newest first
  const json& run = runs[1];
  EXPECT_EQ(run["id"], run_id_);
  EXPECT_EQ(run["name"], "ddp_mlp");
  EXPECT_EQ(run["strategy"], "ddp");
  EXPECT_EQ(run["status"], "completed");
  EXPECT_EQ(run["world_size"], kRanks);
  storage::Database db(dbPath());
  EXPECT_EQ(run["final_step"],
            queryInt(db, fmt::format("SELECT max(step) FROM steps WHERE run_id = {}", run_id_)));
  EXPECT_GE(run["final_step"].get<int64_t>(), 19);
  EXPECT_TRUE(run["final_loss"].is_number());
  EXPECT_TRUE(run["duration_s"].is_number());
  EXPECT_TRUE(run["created_at"].is_number());
  EXPECT_TRUE(run["started_at"].is_number());
  EXPECT_TRUE(run["ended_at"].is_number());
  EXPECT_TRUE(run["error"].is_null());

  EXPECT_EQ(getJson("/api/v1/runs?status=completed")["runs"].size(), 2u);
  EXPECT_EQ(getJson("/api/v1/runs?status=failed")["runs"].size(), 0u);
  EXPECT_EQ(getJson("/api/v1/runs?strategy=ddp")["runs"][0]["id"], run_id_);
  EXPECT_EQ(getJson("/api/v1/runs?strategy=ddp")["runs"].size(), 1u);
  EXPECT_EQ(getJson("/api/v1/runs?strategy=fsdp")["runs"].size(), 0u);
  EXPECT_EQ(getJson("/api/v1/runs?name=ddp_")["runs"].size(), 1u);
  EXPECT_EQ(getJson("/api/v1/runs?name=mlp")["runs"].size(), 2u);
  EXPECT_EQ(getJson("/api/v1/runs?name=nothing-like-it")["runs"].size(), 0u);
  EXPECT_EQ(getJson("/api/v1/runs?limit=1")["runs"].size(), 1u);
}

TEST_F(WebServerTest, ARunHasItsSpecSummaryRanksEvalsIngestAndMetrics) {
  start();
  const json detail = getJson(runPath());
  EXPECT_EQ(detail["run"]["id"], run_id_);
  EXPECT_EQ(detail["version"], storage::kRunReportVersion);
  EXPECT_EQ(detail["spec"]["strategy"]["dp"]["kind"], "ddp");
  EXPECT_EQ(detail["spec"]["train"]["steps"], 20);
  EXPECT_EQ(detail["planned_steps"], 20);
  EXPECT_TRUE(detail["program"].is_null());
  const int64_t steps = detail["final_step"];
  EXPECT_GE(steps, 19);
  EXPECT_GT(detail["samples_per_second"].get<double>(), 0);
  EXPECT_GT(detail["mean_step_ms"].get<double>(), 0);
  ASSERT_EQ(detail["ranks"].size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    SCOPED_TRACE(r);
    const json& rank = detail["ranks"][r];
    EXPECT_EQ(rank["rank"], r);
    EXPECT_TRUE(rank["host"].is_string());
    EXPECT_GT(rank["pid"].get<int64_t>(), 0);
    EXPECT_TRUE(rank["device"].is_string());
    EXPECT_EQ(rank["status"], "completed");
    EXPECT_EQ(rank["last_step"], steps);
    EXPECT_GT(rank["samples_per_second"].get<double>(), 0);
    EXPECT_GT(rank["mean_step_ms"].get<double>(), 0);
    EXPECT_TRUE(rank["mean_compute_ms"].is_number());
    EXPECT_TRUE(rank["mean_exposed_comm_ms"].is_number());
    EXPECT_GT(rank["peak_memory"].get<int64_t>(), 0);
    EXPECT_GT(rank["estimated_memory"].get<double>(), 0);
    EXPECT_TRUE(rank["straggler"].is_boolean());
    EXPECT_TRUE(rank.contains("tokens_per_second"));
  }
  EXPECT_TRUE(detail["evals"].is_array());
  // One attempt (no restart, launch.max_restarts): its steps, no root cause.
  ASSERT_EQ(detail["attempts"].size(), 1u);
  EXPECT_EQ(detail["attempts"][0]["attempt"], 0);
  EXPECT_EQ(detail["attempts"][0]["first_step"], 1);
  EXPECT_EQ(detail["attempts"][0]["last_step"], steps);
  EXPECT_TRUE(detail["attempts"][0]["rolled_back"].is_null());
  EXPECT_TRUE(detail["attempts"][0]["error"].is_null());
  // 20 steps of 4 ranks, each a step event at least.
  EXPECT_GE(detail["ingest"]["stored"].get<int64_t>(), 80);
  EXPECT_EQ(detail["ingest"]["duplicates"], 0);
  EXPECT_EQ(detail["ingest"]["malformed"], 0);
  const std::vector<std::string> metrics = detail["metrics"];
  EXPECT_NE(std::find(metrics.begin(), metrics.end(), "loss"), metrics.end());
  EXPECT_NE(std::find(metrics.begin(), metrics.end(), "step_ms"), metrics.end());
}

// Issue 31, one chart table: GET /api/v1/charts is the table the desktop reads
// (ui/charts/chart_table.h), entry by entry; with run=ID, the charts that apply to that run
// (ddp_mlp is fp32: no loss scale; it reports the gradient norm, issue 33).
TEST_F(WebServerTest, ChartsAreTheOneChartTableAndARunsAreThoseThatApply) {
  start();
  const json all = getJson("/api/v1/charts")["charts"];
  const std::vector<ui::ChartSpec>& table = ui::chartTable();
  ASSERT_EQ(all.size(), table.size());
  for (size_t i = 0; i < table.size(); ++i) {
    SCOPED_TRACE(table[i].id);
    EXPECT_EQ(all[i]["id"], table[i].id);
    EXPECT_EQ(all[i]["title"], table[i].title);
    EXPECT_EQ(all[i]["unit"], table[i].unit);
    EXPECT_EQ(all[i]["source"],
              table[i].source == ui::ChartSource::kCommByOp ? "comm_by_op" : "step_metrics");
    ASSERT_EQ(all[i]["metrics"].size(), table[i].metrics.size());
    for (size_t m = 0; m < table[i].metrics.size(); ++m) {
      EXPECT_EQ(all[i]["metrics"][m]["key"], table[i].metrics[m].key);
      EXPECT_EQ(all[i]["metrics"][m]["label"], table[i].metrics[m].label);
    }
    EXPECT_EQ(all[i]["every_rank"], ui::everyRankName(table[i].every_rank));
    EXPECT_EQ(all[i]["validation_loss"], table[i].validation_loss);
    EXPECT_EQ(all[i]["applies_when"], ui::conditionName(table[i].applies_when));
    EXPECT_EQ(all[i]["panel"], "");
  }
  const json for_run = getJson(fmt::format("/api/v1/charts?run={}", run_id_))["charts"];
  std::vector<std::string> ids;
  for (const json& chart : for_run) ids.push_back(chart["id"]);
  std::vector<std::string> expected;
  {
    storage::Database db(dbPath());
    for (const ui::ChartSpec& chart : ui::chartsFor({.metrics = storage::metricNames(db, run_id_)}))
      expected.push_back(chart.id);
  }
  EXPECT_EQ(ids, expected);
  EXPECT_EQ(std::find(ids.begin(), ids.end(), "loss-scale"), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), "loss"), ids.end());
  EXPECT_NE(std::find(ids.begin(), ids.end(), "grad-norm"), ids.end());
  expectError("/api/v1/charts?run=999", 404, "no run 999");
  expectError("/api/v1/charts?run=x", 400, "run");
  expectError("/api/v1/charts/loss", 404, "no such API path");
}

// Issue 33, any metric: a script's own metrics (names outside the step record, logged by a real
// program job on 2 ranks) each get a chart, titled by the name, in the panel of its prefix, and
// their series are read like any other.
TEST_F(WebServerTest, EveryOwnMetricOfARunGetsAChartInItsPanel) {
  // Its own database, so that the suite's runs stay the two the other cases count: the job twice
  // (compare needs two runs).
  WebServerOptions own_db = options();
  own_db.db_path = (dir_ / "own_metrics.db").string();
  const std::string spec = ringmaster::testing::writeOwnMetricsJob(dir_, "own_metrics", 2, 3);
  for (int i = 0; i < 2; ++i) {
    CapturedProcess run(kRingmaster, {"--db", own_db.db_path, "run", spec, "-q"});
    const ExitStatus status = run.wait(120s);
    ASSERT_TRUE(status.ok()) << status.describe() << "\n" << run.out() << run.err();
  }
  const int64_t own_run_id = 2, other_run_id = 1;
  start(own_db);
  const json body = getJson(fmt::format("/api/v1/charts?run={}", own_run_id));
  EXPECT_EQ(body["default_panel"], "Charts");
  std::vector<std::pair<std::string, std::string>> own;  // panel, title
  std::vector<std::string> panels;
  for (const json& chart : body["charts"]) {
    const std::string panel = chart["panel"];
    if (panels.empty() || panels.back() != panel) panels.push_back(panel);
    if (!chart["id"].get<std::string>().starts_with("metric:")) continue;
    own.emplace_back(panel, chart["title"]);
    EXPECT_EQ(chart["metrics"][0]["key"], chart["title"]);
    EXPECT_EQ(chart["source"], "step_metrics");
  }
  const std::vector<std::pair<std::string, std::string>> expected = {
      {"", "my_custom_thing"}, {"eval", "eval/acc"}, {"train", "train/grad_norm"}};
  EXPECT_EQ(own, expected);
  // Each panel once, the default one first.
  EXPECT_EQ(panels, (std::vector<std::string>{"", "eval", "train"}));
  const json series =
      getJson(fmt::format("/api/v1/runs/{}/series?metric=eval%2Facc&ranks=1", own_run_id));
  ASSERT_EQ(series["ranks"].size(), 1u);
  EXPECT_EQ(series["ranks"][0]["buckets"].size(), 3u);
  const json band =
      getJson(fmt::format("/api/v1/runs/{}/series?metric=my_custom_thing&ranks=band", own_run_id));
  EXPECT_EQ(band["band"].size(), 3u);
  const json detail = getJson(fmt::format("/api/v1/runs/{}", own_run_id));
  for (const char* name : {"train/grad_norm", "eval/acc", "my_custom_thing"})
    EXPECT_NE(std::find(detail["metrics"].begin(), detail["metrics"].end(), name),
              detail["metrics"].end())
        << name;
  // Compare offers every metric of the runs (the wall time aside), with its chart's title.
  const json compared =
      getJson(fmt::format("/api/v1/compare?runs={},{}", other_run_id, own_run_id));
  std::map<std::string, std::string> offered;
  for (const json& metric : compared["metrics"]) offered[metric["key"]] = metric["title"];
  EXPECT_EQ(offered["eval/acc"], "eval/acc");
  EXPECT_EQ(offered["train/grad_norm"], "train/grad_norm");
  EXPECT_EQ(offered["loss"], "Loss");
  EXPECT_FALSE(offered.contains("wall_time_s"));
}

// Issue 21, the live hang view: a running run whose ranks 0 and 2 report waiting in all_reduce #28
// while rank 1's reports stopped short of it has the diagnosis in its detail and what each rank
// waits on in its rows; the recorded runs, which ended, have none.
TEST_F(WebServerTest, ARunningRunsDetailHasTheHangDiagnosis) {
  const std::string path = (dir_ / "hang.db").string();
  const double now =
      std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  {
    storage::Database db(path);
    db.exec(
        fmt::format("INSERT INTO runs (name, spec, strategy, world_size, status, created_at) "
                    "VALUES ('hung', '{{}}', 'ddp', 3, 'running', {0}); INSERT INTO "
                    "attempts (run_id, attempt, started_at) VALUES (1, 0, {0});",
                    now));
    for (int rank : {0, 2}) {
      db.exec(
          fmt::format("INSERT INTO rank_progress (run_id, attempt, rank, group_name, t, "
                      "period_s, started, completed, op, op_seq, waiting_ms) VALUES (1, 0, "
                      "{}, 'world', {}, 2, 28, 27, 'all_reduce', 28, 40000)",
                      rank, now));
    }
    db.exec(
        fmt::format("INSERT INTO rank_progress (run_id, attempt, rank, group_name, t, "
                    "period_s, started, completed) VALUES (1, 0, 1, 'world', {}, 2, 27, 27)",
                    now - 20));
  }
  WebServerOptions o = options();
  o.db_path = path;
  start(o);
  const json detail = getJson("/api/v1/runs/1");
  EXPECT_TRUE(detail["hang"]["running"].get<bool>());
  ASSERT_EQ(detail["hang"]["diagnoses"].size(), 1u) << detail.dump(2);
  const json& hang = detail["hang"]["diagnoses"][0];
  EXPECT_EQ(hang["op"], "all_reduce");
  EXPECT_EQ(hang["seq"], 28);
  EXPECT_EQ(hang["stuck"], json::array({1}));
  EXPECT_EQ(hang["waiting"], json::array({0, 2}));
  EXPECT_TRUE(
      hang["message"].get<std::string>().starts_with("rank 1 has not reached all_reduce #28"))
      << hang["message"];
  ASSERT_EQ(detail["ranks"].size(), 3u);
  EXPECT_TRUE(detail["ranks"][1]["waiting_on"].get<std::string>().starts_with(
      "has not reached all_reduce #28"));
  EXPECT_TRUE(detail["ranks"][0]["waiting_on"].get<std::string>().starts_with("waiting"));
  server_->stop();
  server_.reset();
  start();
  const json ended = getJson(runPath());
  EXPECT_FALSE(ended["hang"]["running"].get<bool>());
  EXPECT_TRUE(ended["hang"]["diagnoses"].empty());
  for (const json& rank : ended["ranks"]) EXPECT_TRUE(rank["waiting_on"].is_null());
}

// Issue 33: a real program job failing on a misspelled argument; the run's detail, which the web
// header draws, has argparse's message under the root cause (error_output), as text for the page
// to put in text nodes.
TEST_F(WebServerTest, AFailedRunsDetailHasItsRanksLastStderrLines) {
  const fs::path script = dir_ / "bad_args.py";
  std::ofstream(script) << "import argparse\nparser = argparse.ArgumentParser()\n"
                           "parser.add_argument('--lr', type=float)\nparser.parse_args()\n";
  const json spec = {
      {"name", "bad-args"},
      {"program",
       {{"python", "/usr/bin/python3"}, {"script", script.string()}, {"args", {"--lrr", "0.1"}}}},
      {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", 1}}}}, {"timeout_s", 60}}}};
  std::ofstream(dir_ / "bad_args.json") << spec.dump();
  const std::string path = (dir_ / "failed.db").string();
  CapturedProcess run(kRingmaster, {"--db", path, "run", (dir_ / "bad_args.json").string(), "-q"});
  ASSERT_EQ(run.wait(60s).exit_code, 1) << run.err();
  WebServerOptions o = options();
  o.db_path = path;
  start(o);
  const json detail = getJson("/api/v1/runs/1");
  EXPECT_EQ(detail["run"]["status"], "failed");
  EXPECT_NE(detail["run"]["error"].get<std::string>().find("exit code 2"), std::string::npos);
  EXPECT_EQ(detail["error_output"],
            json::array({"usage: bad_args.py [-h] [--lr LR]",
                         "bad_args.py: error: unrecognized arguments: --lrr 0.1"}))
      << detail["error_output"].dump(2);
  // The run page asks for the logs first: they hold the same lines.
  const json logs = getJson("/api/v1/runs/1/logs?rank=0");
  bool found = false;
  for (const json& line : logs["logs"])
    found = found || line["message"].get<std::string>().find("unrecognized arguments: --lrr") !=
                         std::string::npos;
  EXPECT_TRUE(found) << logs.dump(2);
}

TEST_F(WebServerTest, SeriesComeAsBucketsPerRankOrAsTheBand) {
  start();
  const int64_t steps = getJson(runPath())["final_step"];
  const json all = getJson(runPath("/series?metric=loss"));
  EXPECT_EQ(all["metric"], "loss");
  EXPECT_EQ(all["bucket_width"], 1);
  ASSERT_EQ(all["ranks"].size(), static_cast<size_t>(kRanks));
  for (int r = 0; r < kRanks; ++r) {
    EXPECT_EQ(all["ranks"][r]["rank"], r);
    const json& buckets = all["ranks"][r]["buckets"];
    EXPECT_GE(buckets.size(), static_cast<size_t>(steps - 1));
    for (const json& bucket : buckets) {
      ASSERT_EQ(bucket.size(), 5u);  // start, min, max, mean, last
      EXPECT_LE(bucket[1].get<double>(), bucket[3].get<double>());
      EXPECT_LE(bucket[3].get<double>(), bucket[2].get<double>());
    }
  }
  const json reduced = getJson(runPath("/series?metric=loss&ranks=1,3&buckets=4"));
  ASSERT_EQ(reduced["ranks"].size(), 2u);
  EXPECT_EQ(reduced["ranks"][0]["rank"], 1);
  EXPECT_EQ(reduced["ranks"][1]["rank"], 3);
  EXPECT_LE(reduced["ranks"][0]["buckets"].size(), 4u);
  EXPECT_GT(reduced["bucket_width"].get<int64_t>(), 1);

  const json range = getJson(runPath("/series?metric=step_ms&ranks=0&from=5&to=9"));
  ASSERT_EQ(range["ranks"][0]["buckets"].size(), 5u);
  EXPECT_EQ(range["ranks"][0]["buckets"][0][0], 5);
  EXPECT_EQ(range["ranks"][0]["buckets"][4][0], 9);

  const json band = getJson(runPath("/series?metric=loss&ranks=band&buckets=10"));
  EXPECT_FALSE(band.contains("ranks"));
  ASSERT_FALSE(band["band"].empty());
  EXPECT_LE(band["band"].size(), 10u);
  for (const json& bucket : band["band"]) {
    ASSERT_EQ(bucket.size(), 4u);  // start, min, median, max
    EXPECT_LE(bucket[1].get<double>(), bucket[2].get<double>());
    EXPECT_LE(bucket[2].get<double>(), bucket[3].get<double>());
  }
}

TEST_F(WebServerTest, CommunicationByOpByRankAndAsAHeatMap) {
  start();
  const json comm = getJson(runPath("/comm"));
  ASSERT_FALSE(comm["by_op"].empty());
  bool all_reduce = false;
  for (const json& op : comm["by_op"]) {
    all_reduce |= op["op"] == "all_reduce";
    EXPECT_GT(op["count"].get<int64_t>(), 0);
    EXPECT_TRUE(op["p50_ms"].is_number());
    EXPECT_TRUE(op["busbw_gbps"].is_number());
  }
  EXPECT_TRUE(all_reduce) << comm["by_op"].dump();
  ASSERT_EQ(comm["by_rank"].size(), static_cast<size_t>(kRanks));
  EXPECT_TRUE(comm["by_rank"][0]["straggler"].is_boolean());
  // Issue 21: each rank's measured wait per collective and its peers' (null where not measured).
  for (const char* key : {"mean_wait_ms", "peers_mean_wait_ms"})
    EXPECT_TRUE(comm["by_rank"][0].contains(key)) << key << " " << comm["by_rank"][0].dump();

  const json map = getJson(runPath("/comm/heatmap?buckets=5"));
  ASSERT_EQ(map["values"].size(), static_cast<size_t>(kRanks));
  ASSERT_FALSE(map["bucket_starts"].empty());
  EXPECT_LE(map["bucket_starts"].size(), 5u);
  for (const json& row : map["values"]) EXPECT_EQ(row.size(), map["bucket_starts"].size());
}

// Issue 34: communication per mesh dimension, the run report's comm_dims, for real runs: a DDP
// run's one dimension is dp and a pipeline's pp, each spanning the world, so the device mesh labels
// every event with it and its operations are all the run's; the runs' meshes are one-dimensional
// and each rank's coordinates its place in it.
TEST_F(WebServerTest, CommunicationPerMeshDimensionAndTheRanksCoordinates) {
  start();
  for (const int64_t run : {run_id_, pipeline_run_id_}) {
    SCOPED_TRACE(run);
    const std::string path = fmt::format("/api/v1/runs/{}", run);
    const json dims = getJson(path + "/comm_dims");
    ASSERT_EQ(dims["dims"].size(), 1u) << dims.dump();
    EXPECT_EQ(dims["dims"][0]["dim"], run == pipeline_run_id_ ? "pp" : "dp");
    EXPECT_EQ(dims["dims"][0]["ranks"], kRanks);
    int64_t operations = 0;
    const json comm = getJson(path + "/comm");
    for (const json& rank : comm["by_rank"]) operations += rank["operations"].get<int64_t>();
    EXPECT_EQ(dims["dims"][0]["operations"], operations);
    EXPECT_GT(dims["dims"][0]["ms_per_step"].get<double>(), 0);
    EXPECT_EQ(dims["ranks"].size(), static_cast<size_t>(kRanks));

    const json detail = getJson(path);
    EXPECT_EQ(detail["comm_dims"], dims);
    const bool pipeline = run == pipeline_run_id_;
    EXPECT_EQ(detail["run"]["mesh"],
              (json{{"dp", pipeline ? 1 : kRanks}, {"tp", 1}, {"pp", pipeline ? kRanks : 1}}));
    for (int r = 0; r < kRanks; ++r) {
      EXPECT_EQ(detail["ranks"][r]["coords"],
                (json{{"dp", pipeline ? 0 : r}, {"tp", 0}, {"pp", pipeline ? r : 0}}))
          << r;
    }
  }
  expectError("/api/v1/runs/999/comm_dims", 404, "no run 999");
}

// Issue 20: the run page's "communication by op" chart is the desktop's query over HTTP. The
// document is storage::commTimeByOp's value for value (every rank's mean, one rank, a reduced and a
// zoomed range), its whole-run figures agree with a reference summed here from the stored events,
// and with /comm's totals per op once the events without a step (which no step owns) are added.
TEST_F(WebServerTest, CommunicationByOpOverStepsIsTheDesktopsQuery) {
  start();
  storage::Database db(dbPath());
  struct Case {
    std::string query;
    int64_t from = 0, to = std::numeric_limits<int64_t>::max();
    int buckets = 1000;
    std::optional<int> rank;
  };
  const std::vector<Case> cases = {{""},
                                   {"?rank=2", 0, std::numeric_limits<int64_t>::max(), 1000, 2},
                                   {"?buckets=4", 0, std::numeric_limits<int64_t>::max(), 4},
                                   {"?from=5&to=9&rank=1&buckets=3", 5, 9, 3, 1}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.query);
    const json document = getJson(runPath("/comm/series" + c.query));
    const storage::CommTimeByOp expected =
        storage::commTimeByOp(db, run_id_, c.from, c.to, c.buckets, c.rank);
    ASSERT_FALSE(expected.ops.empty());
    EXPECT_EQ(document["rank"], c.rank ? json(*c.rank) : json(nullptr));
    EXPECT_EQ(document["bucket_width"], expected.bucket_width);
    ASSERT_EQ(document["ops"].size(), expected.ops.size());
    for (size_t i = 0; i < expected.ops.size(); ++i) {
      const json& op = document["ops"][i];
      EXPECT_EQ(op["op"], expected.ops[i].op);
      ASSERT_EQ(op["buckets"].size(), expected.ops[i].buckets.size()) << op["op"];
      EXPECT_LE(op["buckets"].size(), static_cast<size_t>(c.buckets));
      for (size_t b = 0; b < expected.ops[i].buckets.size(); ++b) {
        const json& bucket = op["buckets"][b];
        ASSERT_EQ(bucket.size(), 2u);  // start, ms per step
        EXPECT_EQ(bucket[0], expected.ops[i].buckets[b].start);
        EXPECT_GE(bucket[0].get<int64_t>(), c.from);
        EXPECT_LE(bucket[0].get<int64_t>(), c.to);
        EXPECT_DOUBLE_EQ(bucket[1].get<double>(), expected.ops[i].buckets[b].ms_per_step);
      }
    }
  }
  EXPECT_GT(getJson(runPath("/comm/series?buckets=4"))["bucket_width"].get<int64_t>(), 1);

  // The reference: per op and step, the transfer time (duration less any wait) over the (rank,
  // step) pairs that had any communication; events without a step kept apart. A rank's transfers
  // of one op in one step count the time they cover (issue 32): their intervals, each ending at
  // the event's t after the wait at its start, sorted and merged (one clear of the earlier ones
  // adds its stored length, as the query does, not the difference of its rounded ends).
  std::map<int64_t, std::set<int>> ranks_at;  // step -> ranks communicating
  struct Span {
    double start, end, length;
    bool operator<(const Span& other) const { return start < other.start; }
  };
  std::map<std::tuple<std::string, int64_t, int>, std::vector<Span>> spans;
  std::map<std::string, double> stepless;  // op -> ms, summed
  storage::Statement events(db,
                            "SELECT op, rank, step, max(duration_ms - coalesce(wait_ms, 0), 0), "
                            "t * 1000.0 - duration_ms + min(max(coalesce(wait_ms, 0), 0), "
                            "duration_ms) FROM comm_events WHERE run_id = ?");
  events.bind(1, run_id_);
  while (events.run()) {
    const std::string op = events.columnText(0);
    if (events.isNull(2)) {
      stepless[op] += events.columnDouble(3);
      continue;
    }
    const int64_t step = events.columnInt(2);
    const int rank = static_cast<int>(events.columnInt(1));
    ranks_at[step].insert(rank);
    const double start = events.columnDouble(4), length = events.columnDouble(3);
    spans[{op, step, rank}].push_back({start, start + length, length});
  }
  std::map<std::string, std::map<int64_t, double>> transfer;  // op -> step -> ms
  std::map<std::string, double> summed;                       // op -> ms, overlaps counted each
  for (auto& [key, intervals] : spans) {
    const auto& [op, step, rank] = key;
    std::sort(intervals.begin(), intervals.end());
    double covered = 0, reach = -std::numeric_limits<double>::infinity();
    for (const Span& span : intervals) {
      covered += reach <= span.start ? span.length : std::max(span.end - reach, 0.0);
      reach = std::max(reach, span.end);
      summed[op] += span.length;
    }
    transfer[op][step] += covered;
  }
  const json whole = getJson(runPath("/comm/series"));  // 20 steps: one bucket per step
  ASSERT_EQ(whole["bucket_width"], 1);
  ASSERT_EQ(whole["ops"].size(), transfer.size());
  std::map<std::string, double> totals;  // op -> ms, from the document
  for (const json& op : whole["ops"]) {
    const std::string name = op["op"];
    ASSERT_TRUE(transfer.contains(name)) << name;
    EXPECT_EQ(op["buckets"].size(), transfer[name].size()) << name;
    for (const json& bucket : op["buckets"]) {
      const int64_t step = bucket[0];
      const double pairs = static_cast<double>(ranks_at[step].size());
      EXPECT_NEAR(bucket[1].get<double>(), transfer[name][step] / pairs, 1e-9)
          << name << " at step " << step;
      totals[name] += bucket[1].get<double>() * pairs;
    }
    EXPECT_GT(totals[name], 0) << name;
  }
  EXPECT_TRUE(totals.contains("all_reduce"));
  // /comm's by_op rows are per op and message size; their sum per op is every event's transfer,
  // overlapping ones counted each: at least the time they cover.
  std::map<std::string, double> comm_totals;
  // Kept in a local: a range-for over a member of the temporary document would read freed memory.
  const json by_op = getJson(runPath("/comm"))["by_op"];
  for (const json& row : by_op) comm_totals[row["op"]] += row["total_ms"].get<double>();
  for (const auto& [name, total] : comm_totals) {
    const double tolerance = 1e-6 * std::max(1.0, total);
    EXPECT_NEAR(summed[name] + stepless[name], total, tolerance) << name;
    EXPECT_LE(totals[name] + stepless[name], total + tolerance) << name;
  }
}

TEST_F(WebServerTest, LogsFlightRecorderScheduleAndCompare) {
  start();
  const json logs = getJson(runPath("/logs"))["logs"];
  ASSERT_FALSE(logs.empty());
  for (const json& line : logs) {
    EXPECT_TRUE(line["t"].is_number());
    EXPECT_TRUE(line["level"].is_string());
    EXPECT_TRUE(line["message"].is_string());
    EXPECT_TRUE(line.contains("rank"));
  }
  EXPECT_EQ(getJson(runPath("/logs?limit=1"))["logs"].size(), 1u);
  const std::string first_word = logs[0]["message"].get<std::string>().substr(0, 4);
  // Kept whole: a range-for over a member of the temporary would read it after its end.
  const json filtered = getJson(runPath("/logs?level=info&contains=" + first_word));
  for (const json& line : filtered["logs"]) {
    EXPECT_EQ(line["level"], "info");
    EXPECT_NE(line["message"].get<std::string>().find(first_word), std::string::npos);
  }
  EXPECT_TRUE(getJson(runPath("/flight-recorder"))["dumps"].is_array());

  // A data-parallel run has no pipeline schedule: none measured, none planned.
  const json schedule = getJson(runPath("/schedule"));
  EXPECT_TRUE(schedule["measured"].is_null());
  EXPECT_TRUE(schedule["planned"].is_null());
  EXPECT_EQ(getJson(runPath("/schedule/steps"))["steps"], json::array());

  const json same = getJson(fmt::format("/api/v1/compare?runs={},{}", run_id_, run_id_));
  ASSERT_EQ(same["runs"].size(), 2u);
  EXPECT_EQ(same["spec_differences"], json::array());
  const json compared =
      getJson(fmt::format("/api/v1/compare?runs={},{}", run_id_, pipeline_run_id_));
  ASSERT_EQ(compared["runs"].size(), 2u);
  EXPECT_EQ(compared["runs"][0]["run"]["id"], run_id_);
  EXPECT_EQ(compared["runs"][1]["run"]["id"], pipeline_run_id_);
  EXPECT_TRUE(compared["runs"][0]["samples_per_second"].is_number());
  bool strategy_differs = false;
  for (const json& difference : compared["spec_differences"])
    if (difference["path"] == "strategy.mesh.pp")  // 4 ranks of ddp, then of a pipeline
      strategy_differs =
          difference["values"] == json{"1", "4"} || difference["values"] == json{1, 4};
  EXPECT_TRUE(strategy_differs) << compared["spec_differences"].dump();
}

TEST_F(WebServerTest, APipelineRunHasItsMeasuredAndPlannedSchedules) {
  start();
  const std::string base = fmt::format("/api/v1/runs/{}", pipeline_run_id_);
  const std::vector<int64_t> steps = getJson(base + "/schedule/steps")["steps"];
  ASSERT_GE(steps.size(), 2u);
  const json schedule = getJson(base + "/schedule");
  const json& measured = schedule["measured"];
  EXPECT_EQ(measured["step"], steps[1]);  // the first after the warm-up
  // 1F1B, 8 micro-batches, 4 stages: a forward and a backward of each on every rank.
  EXPECT_EQ(measured["actions"].size(), 4u * 8u * 2u);
  for (const json& action : measured["actions"]) {
    EXPECT_LE(action["start_us"].get<int64_t>(), action["ready_us"].get<int64_t>());
    EXPECT_LE(action["ready_us"].get<int64_t>(), action["end_us"].get<int64_t>());
  }
  ASSERT_EQ(measured["ranks"].size(), static_cast<size_t>(kRanks));
  const double bubble = measured["bubble_fraction"];
  EXPECT_GT(bubble, 0);
  EXPECT_LT(bubble, 1);
  const json& planned = schedule["planned"];
  EXPECT_EQ(planned["ranks"], kRanks);
  EXPECT_EQ(planned["actions"].size(), 4u * 8u * 2u);
  // 1F1B's bubble with unit costs: (p - 1) / (m + p - 1) = 3 / 11.
  EXPECT_NEAR(planned["theoretical_bubble"].get<double>(), 3.0 / 11.0, 1e-9);
  EXPECT_TRUE(schedule["mean_bubble_fraction"].is_number());
  EXPECT_EQ(getJson(base + "/schedule?step=" + std::to_string(steps[0]))["measured"]["step"],
            steps[0]);
  // Issue 33: the plan replayed with the step's measured stage costs, and the gap between the
  // planned and the measured bubble split into stage imbalance and runtime overhead.
  const json& replayed = schedule["replayed"];
  ASSERT_TRUE(replayed.is_object()) << schedule.dump();
  EXPECT_EQ(replayed["actions"].size(), 4u * 8u * 2u);
  for (const json& action : replayed["actions"])
    EXPECT_LE(action["start_us"].get<double>(), action["end_us"].get<double>());
  const json& split = schedule["split"];
  EXPECT_NEAR(split["planned"].get<double>(), planned["bubble_fraction"].get<double>(), 1e-12);
  EXPECT_NEAR(split["measured"].get<double>(), bubble, 1e-12);
  EXPECT_EQ(split["replayed"], replayed["bubble_fraction"]);
  EXPECT_NEAR(split["imbalance_pts"].get<double>() + split["overhead_pts"].get<double>(),
              100 * (bubble - split["planned"].get<double>()), 1e-9);
  EXPECT_EQ(split["stages"].size(), 4u);
  EXPECT_NE(split["text"].get<std::string>().find("stage imbalance: "), std::string::npos);
  // The run's report carries the split over its steps after the first.
  const json report = getJson(base);
  EXPECT_EQ(report["bubble_split"]["measured"], report["bubble_fraction"]);
  // A data-parallel run has none.
  EXPECT_TRUE(getJson(runPath(""))["bubble_split"].is_null());
}

TEST_F(WebServerTest, UnknownRunsAndBadParametersAreRefusedByName) {
  start();
  expectError("/api/v1/runs/999", 404, "no run 999");
  expectError("/api/v1/runs/999/series?metric=loss", 404, "no run 999");
  expectError("/api/v1/compare?runs=" + std::to_string(run_id_) + ",999", 404, "no run 999");
  expectError("/api/v1/runs/abc", 400, "run id");
  expectError("/api/v1/runs/-1", 400, "run id");
  expectError("/api/v1/nothing", 404, "no such API path");
  expectError(runPath("/nothing"), 404, "no such API path");
  expectError("/api/v1/runs?status=bogus", 400, "status");
  expectError("/api/v1/runs?strategy=bogus", 400, "strategy");
  expectError("/api/v1/runs?limit=0", 400, "limit");
  expectError("/api/v1/runs?name=" + std::string(300, 'x'), 400, "name");
  expectError(runPath("/series"), 400, "metric");
  expectError(runPath("/series?metric=nonesuch"), 400, "metric");
  for (const char* buckets : {"0", "4097", "x", "1.5", "-3", "99999999999999999999"})
    expectError(runPath("/series?metric=loss&buckets=") + buckets, 400, "buckets");
  expectError(runPath("/series?metric=loss&from=-1"), 400, "from");
  expectError(runPath("/series?metric=loss&from=x"), 400, "from");
  expectError(runPath("/series?metric=loss&to=y"), 400, "to");
  expectError(runPath("/series?metric=loss&from=9&to=3"), 400, "to");
  for (const char* ranks : {"4", "-1", "x", "0,,1", "1,9", ""})
    expectError(runPath("/series?metric=loss&ranks=") + ranks, 400, "ranks");
  expectError(runPath("/comm/heatmap?buckets=0"), 400, "buckets");
  expectError("/api/v1/runs/999/comm/series", 404, "no run 999");
  for (const char* rank : {"4", "-1", "x", "", "1,2"})
    expectError(runPath("/comm/series?rank=") + rank, 400, "rank");
  for (const char* buckets : {"0", "4097", "x"})
    expectError(runPath("/comm/series?buckets=") + buckets, 400, "buckets");
  expectError(runPath("/comm/series?from=-1"), 400, "from");
  expectError(runPath("/comm/series?from=9&to=3"), 400, "to");
  expectError(runPath("/logs?rank=4"), 400, "rank");
  expectError(runPath("/logs?level=loud"), 400, "level");
  expectError(runPath("/logs?limit=0"), 400, "limit");
  expectError(runPath("/logs?limit=10001"), 400, "limit");
  expectError(runPath("/logs?contains=") + std::string(300, 'x'), 400, "contains");
  expectError(runPath("/schedule?step=3"), 400, "step");
  expectError(runPath("/schedule?step=x"), 400, "step");
  expectError("/api/v1/compare", 400, "runs");
  expectError("/api/v1/compare?runs=x", 400, "runs");
  expectError("/api/v1/compare?runs=1,2,3,4,5,6,7,8,9", 400, "runs");
}

TEST_F(WebServerTest, OnlyGetIsServedAndRequestsAreBounded) {
  start();
  for (const char* path : {"/api/v1/runs", "/", "/api/v1/stream"}) {
    httplib::Result post = client_->Post(path, "{}", "application/json");
    ASSERT_TRUE(post) << path;
    EXPECT_EQ(post->status, 405) << path;
    EXPECT_EQ(json::parse(post->body)["error"]["status"], 405);
    // A body is never read: refused, or the connection closed under the sender.
    httplib::Result big = client_->Post(path, std::string(1 << 20, 'x'), "text/plain");
    EXPECT_TRUE(!big || big->status == 405) << path;
  }
  httplib::Result del = client_->Delete(runPath().c_str());
  ASSERT_TRUE(del);
  EXPECT_EQ(del->status, 405);
  // A request line past cpp-httplib's bound is refused, and the server goes on.
  httplib::Result huge = get("/api/v1/runs?name=" + std::string(64 * 1024, 'x'));
  EXPECT_TRUE(!huge || huge->status >= 400) << huge->status;
  EXPECT_EQ(get("/api/v1/runs")->status, 200);
}

// --- the event stream ----------------------------------------------------------------------------

// One event-stream client on its own thread: the events it received, with when each frame came.
class StreamClient {
 public:
  StreamClient(int port, std::string path = "/api/v1/stream") : client_("127.0.0.1", port) {
    client_.set_read_timeout(30, 0);
    thread_ = std::thread([this, path] {
      client_.Get(path.c_str(), [this](const char* data, size_t size) {
        std::lock_guard lock(mutex_);
        text_.append(data, size);
        frames_.push_back(std::chrono::steady_clock::now());
        return !stop_.load();
      });
      finished_ = true;
    });
  }
  ~StreamClient() { close(); }
  void close() {
    stop_ = true;
    client_.stop();
    if (thread_.joinable()) thread_.join();
  }
  // The `event: NAME` events' data, parsed.
  std::vector<json> events(const std::string& name) const {
    std::lock_guard lock(mutex_);
    std::vector<json> out;
    size_t at = 0;
    const std::string head = "event: " + name + "\ndata: ";
    while ((at = text_.find(head, at)) != std::string::npos) {
      at += head.size();
      const size_t end = text_.find('\n', at);
      if (end == std::string::npos) break;
      out.push_back(json::parse(text_.substr(at, end - at)));
    }
    return out;
  }
  std::string text() const {
    std::lock_guard lock(mutex_);
    return text_;
  }
  std::vector<std::chrono::steady_clock::time_point> frames() const {
    std::lock_guard lock(mutex_);
    return frames_;
  }
  bool finished() const { return finished_; }

 private:
  httplib::Client client_;
  mutable std::mutex mutex_;
  std::string text_;
  std::vector<std::chrono::steady_clock::time_point> frames_;
  std::atomic<bool> stop_{false}, finished_{false};
  std::thread thread_;
};

template <typename Predicate>
bool waitFor(Predicate predicate, std::chrono::milliseconds limit) {
  const auto deadline = std::chrono::steady_clock::now() + limit;
  while (!predicate()) {
    if (std::chrono::steady_clock::now() > deadline) return false;
    std::this_thread::sleep_for(20ms);
  }
  return true;
}

// `run` events of `run_id` with a step above `after`.
bool hasRunEventAfter(const StreamClient& client, int64_t run_id, int64_t after) {
  for (const json& event : client.events("run"))
    if (event["id"] == run_id && event["final_step"].get<int64_t>() > after) return true;
  return false;
}

TEST_F(WebServerTest, AStreamGetsCoalescedRunEventsWhileARunRecordsAndResumesAfterAReconnect) {
  // Into a copy of the database, so that the other cases see the two recorded runs only.
  const std::string live_db = (dir_ / "live.db").string();
  fs::copy_file(dbPath(), live_db, fs::copy_options::overwrite_existing);
  WebServerOptions o = options();
  o.db_path = live_db;
  start(o);
  auto stream = std::make_unique<StreamClient>(server_->port());
  ASSERT_TRUE(waitFor([&] { return stream->text().find("retry: 2000") != std::string::npos; }, 5s));
  CapturedProcess run(kRingmaster, {"--db", live_db, "run", kSpec, "--set", "train.steps=1000000",
                                    "--set", "telemetry.every_steps=1", "-q"});
  // The new run appears as a `runs` event, running, then gets `run` events as steps arrive.
  int64_t live_id = 0;
  ASSERT_TRUE(waitFor(
      [&] {
        for (const json& runs : stream->events("runs"))
          for (const json& entry : runs)
            if (entry["id"].get<int64_t>() > run_id_) live_id = entry["id"];
        return live_id != 0 && hasRunEventAfter(*stream, live_id, 5);
      },
      60s))
      << stream->text();
  for (const json& event : stream->events("run")) {
    EXPECT_TRUE(event["status"].is_string());
    EXPECT_TRUE(event["final_step"].is_number_integer());
  }
  // Coalesced: the server sends a frame at most every 250 ms whatever the rate of events, so the
  // frames after the first two number at most one per 250 ms of their span. Counted over the
  // span, not pair by pair: when the client's reads return moves single gaps, not the count.
  const auto frames = stream->frames();
  if (frames.size() > 2) {
    const auto span = frames.back() - frames[1];
    EXPECT_LE(frames.size() - 2, static_cast<size_t>(span / 250ms) + 2)
        << frames.size() << " frames in " << std::chrono::duration<double>(span).count() << " s";
  }
  stream->close();

  // A new connection picks up the run where it now is.
  int64_t seen = 0;
  for (const json& event : stream->events("run"))
    if (event["id"] == live_id) seen = std::max(seen, event["final_step"].get<int64_t>());
  stream = std::make_unique<StreamClient>(server_->port());
  EXPECT_TRUE(waitFor([&] { return hasRunEventAfter(*stream, live_id, seen); }, 60s))
      << stream->text();
  run.signal(SIGINT);
  run.wait(60s);
  // Its end is a `runs` event with the final status.
  EXPECT_TRUE(waitFor(
      [&] {
        for (const json& runs : stream->events("runs"))
          for (const json& entry : runs)
            if (entry["id"] == live_id && entry["status"] != "running") return true;
        return false;
      },
      20s))
      << stream->text();
}

TEST_F(WebServerTest, AClientThatNeverReadsIsDroppedAndOthersAreStillAnswered) {
  WebServerOptions o = options();
  o.socket_send_buffer = 1024;  // the kernel's least: the stuck connection fills at once
  o.io_timeout = 500ms;
  o.heartbeat = 1ms;  // a steady flow of keepalives fills what the client never reads
  o.stream_interval = 1ms;
  start(o);
  StreamClient reader(server_->port());
  ASSERT_TRUE(waitFor([&] { return server_->streamClients() == 1; }, 5s));

  const int sock = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(sock, 0);
  const int receive_buffer = 1024;
  setsockopt(sock, SOL_SOCKET, SO_RCVBUF, &receive_buffer, sizeof receive_buffer);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_port = htons(static_cast<uint16_t>(server_->port()));
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(connect(sock, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  const std::string request = "GET /api/v1/stream HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n";
  ASSERT_EQ(send(sock, request.data(), request.size(), 0), static_cast<ssize_t>(request.size()));
  ASSERT_TRUE(waitFor([&] { return server_->streamClients() == 2; }, 5s));

  // Its buffers fill, a write waits past io_timeout, and the server drops it (never reading it
  // here: a read would make room). Meanwhile the API answers and the reader keeps getting its
  // stream.
  const auto started = std::chrono::steady_clock::now();
  while (server_->streamClients() == 2 && std::chrono::steady_clock::now() - started < 10s) {
    httplib::Result res = get("/api/v1/runs");
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 200);
    std::this_thread::sleep_for(50ms);
  }
  EXPECT_EQ(server_->streamClients(), 1) << "the client that never read was not dropped";
  const size_t received = reader.text().size();
  EXPECT_TRUE(waitFor([&] { return reader.text().size() > received + 1000; }, 5s))
      << "the reading client's stream stopped";
  EXPECT_FALSE(reader.finished());
  ::close(sock);
}

TEST_F(WebServerTest, StreamClientsBeyondTheBoundAreRefused) {
  start();  // the default bounds: 128 streams of 160 connection threads
  const int bound = WebServerOptions{}.max_streams;
  // In batches of 32: all 128 connecting at once could overflow the accept queue (64) while the
  // threads are slow to take them on a loaded machine, and a 503 there is the queue's bound, not
  // the streams'.
  std::vector<std::unique_ptr<StreamClient>> streams;
  for (int batch = 0; batch < bound; batch += 32) {
    for (int i = batch; i < std::min(bound, batch + 32); ++i)
      streams.push_back(std::make_unique<StreamClient>(server_->port()));
    const int expected = static_cast<int>(streams.size());
    ASSERT_TRUE(waitFor([&] { return server_->streamClients() == expected; }, 30s))
        << server_->streamClients() << " of " << expected;
  }
  httplib::Result past = get("/api/v1/stream");
  ASSERT_TRUE(past);
  EXPECT_EQ(past->status, 503);
  EXPECT_EQ(past->get_header_value("Retry-After"), "5");
  // The threads kept for the API answer beside the full streams.
  EXPECT_EQ(get("/api/v1/runs")->status, 200);
  EXPECT_EQ(get("/")->status, 200);
  for (const auto& stream : streams) EXPECT_FALSE(stream->finished());
}

}  // namespace
}  // namespace ringmaster
