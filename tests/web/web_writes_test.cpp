// Issue 33: the web server's writes (a run's tags, note, name; DELETE of a run) over real HTTP to
// a WebServer on 127.0.0.1: served only with allow_writes, only from the server's own page (an
// Origin of another site, a cross-site Sec-Fetch-Site, a body that is not JSON, a Host that is not
// this machine's without a token: each refused with 403 and nothing changed), the token rule kept,
// values out of bounds 400, a live run 409, and a deletion that answers its rows per table and
// leaves the other run. The runs list's `q` search finds by tag and note.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <filesystem>
#include <memory>
#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "recorder/run_lifecycle.h"
#include "storage/storage_test_support.h"
#include "web_server.h"

namespace ringmaster::web {
namespace {

using nlohmann::json;

class WebWritesTest : public storage::testing::StorageTest {
 protected:
  void SetUp() override {
    StorageTest::SetUp();
    std::filesystem::create_directories(dir_);
    db_path_ = (dir_ / "runs.db").string();
    storage::Database db(db_path_);
    kept_ = storage::createRun(db, {.name = "kept", .spec_json = "{}", .strategy = "ddp"});
    storage::finishRun(db, kept_, "completed");
    edited_ = storage::createRun(db, {.name = "edited", .spec_json = "{}", .strategy = "ddp"});
    storage::finishRun(db, edited_, "completed");
    live_ = storage::createRun(db, {.name = "live", .spec_json = "{}", .strategy = "ddp"});
  }
  void TearDown() override {
    if (server_) server_->stop();
    StorageTest::TearDown();
  }
  void start(bool allow_writes, std::optional<std::string> token = {}) {
    WebServerOptions options;
    options.db_path = db_path_;
    options.listen = {"127.0.0.1", 0};
    options.allow_writes = allow_writes;
    options.token = token;
    server_ = std::make_unique<WebServer>(std::move(options));
    server_->start();
    client_ = std::make_unique<httplib::Client>("127.0.0.1", server_->port());
    client_->set_read_timeout(10, 0);
  }
  std::string origin() const { return fmt::format("http://127.0.0.1:{}", server_->port()); }
  // A write as the page makes it, with `headers` replacing its own.
  httplib::Result post(const std::string& path, const std::string& body,
                       httplib::Headers headers = {}, const char* type = "application/json") {
    if (!headers.count("Origin")) headers.emplace("Origin", origin());
    return client_->Post(path.c_str(), headers, body, type);
  }
  json run(int64_t id) {
    httplib::Result res = client_->Get(fmt::format("/api/v1/runs/{}", id).c_str());
    return res && res->status == 200 ? json::parse(res->body)["run"] : json();
  }
  std::string tagsPath(int64_t id) const { return fmt::format("/api/v1/runs/{}/tags", id); }

  std::string db_path_;
  int64_t kept_ = 0, edited_ = 0, live_ = 0;
  std::unique_ptr<WebServer> server_;
  std::unique_ptr<httplib::Client> client_;
};

TEST_F(WebWritesTest, TheServersOwnPageEditsAndDeletesAndNothingElseDoes) {
  start(/*allow_writes=*/true);
  httplib::Result res = post(tagsPath(edited_), R"({"add": ["baseline", "lr"]})");
  ASSERT_TRUE(res);
  ASSERT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(json::parse(res->body)["tags"], json({"baseline", "lr"}));
  res = post(fmt::format("/api/v1/runs/{}/note", edited_), R"({"note": "the slow one"})");
  EXPECT_EQ(res->status, 200) << res->body;
  res = post(fmt::format("/api/v1/runs/{}/name", edited_), R"({"name": "renamed"})");
  EXPECT_EQ(res->status, 200) << res->body;
  EXPECT_EQ(run(edited_)["name"], "renamed") << "what was cached before the write is not served";
  EXPECT_EQ(run(edited_)["note"], "the slow one");

  // Not the page's own: refused, nothing changed, and the connection goes on working.
  const std::string port = std::to_string(server_->port());
  const std::vector<std::pair<httplib::Headers, const char*>> foreign = {
      {{{"Origin", "http://evil.example"}}, "application/json"},
      {{{"Origin", "null"}}, "application/json"},
      {{{"Sec-Fetch-Site", "cross-site"}}, "application/json"},
      {{{"Sec-Fetch-Site", "same-site"}}, "application/json"},
      {{}, "text/plain"},
      {{}, "application/x-www-form-urlencoded"},
      // DNS rebinding: another site's name resolving here, its page's own origin.
      {{{"Host", "evil.example:" + port}, {"Origin", "http://evil.example:" + port}},
       "application/json"},
  };
  for (const auto& [headers, type] : foreign) {
    res = post(tagsPath(edited_), R"({"remove": ["baseline"]})", headers, type);
    ASSERT_TRUE(res);
    EXPECT_EQ(res->status, 403) << type << " " << res->body;
  }
  httplib::Headers evil = {{"Origin", "http://evil.example"}};
  res = client_->Delete(fmt::format("/api/v1/runs/{}", edited_).c_str(), evil);
  EXPECT_EQ(res->status, 403);
  EXPECT_EQ(run(edited_)["tags"], json({"baseline", "lr"}));
  // A client that is no browser sends no Origin: the token rule alone (loopback, no token).
  res = client_->Post(tagsPath(edited_).c_str(), R"({"add": ["cli"]})", "application/json");
  EXPECT_EQ(res->status, 200) << res->body;

  // Values out of bounds, bodies that are none, a path that is no write.
  for (const auto& [path, body] : std::vector<std::pair<std::string, std::string>>{
           {tagsPath(edited_), R"({"add": ["two words"]})"},
           {tagsPath(edited_), R"({"add": "baseline"})"},
           {tagsPath(edited_), "not json"},
           {fmt::format("/api/v1/runs/{}/name", edited_), R"({"name": ""})"},
           {fmt::format("/api/v1/runs/{}/note", edited_), R"({"note": 3})"}}) {
    res = post(path, body);
    EXPECT_EQ(res->status, 400) << path << " " << body << " " << res->body;
  }
  EXPECT_EQ(post("/api/v1/runs/999/tags", "{}")->status, 404);
  EXPECT_EQ(post(fmt::format("/api/v1/runs/{}/other", edited_), "{}")->status, 404);

  // The search.
  res = client_->Get("/api/v1/runs?q=tag:baseline");
  ASSERT_EQ(res->status, 200);
  EXPECT_EQ(json::parse(res->body)["runs"].size(), 1u);
  EXPECT_EQ(json::parse(res->body)["runs"][0]["id"], edited_);
  res = client_->Get("/api/v1/runs?q=slow");
  EXPECT_EQ(json::parse(res->body)["runs"][0]["id"], edited_);
  res = client_->Get("/api/v1/runs?q=status:done");
  EXPECT_EQ(res->status, 400);
  EXPECT_NE(res->body.find("status:done"), std::string::npos);

  // Deletion: a live run refused (409), the edited one deleted with its rows per table.
  httplib::Headers page = {{"Origin", origin()}};
  res = client_->Delete(fmt::format("/api/v1/runs/{}", live_).c_str(), page);
  EXPECT_EQ(res->status, 409) << res->body;
  EXPECT_NE(res->body.find("still live"), std::string::npos) << res->body;
  res = client_->Delete(fmt::format("/api/v1/runs/{}", edited_).c_str(), page);
  ASSERT_EQ(res->status, 200) << res->body;
  const json deleted = json::parse(res->body);
  EXPECT_EQ(deleted["rows"], json({{"attempts", 1}, {"run_tags", 3}, {"runs", 1}}));
  EXPECT_EQ(deleted["total"], 5);
  EXPECT_TRUE(run(edited_).is_null());
  EXPECT_EQ(run(kept_)["name"], "kept");
  EXPECT_EQ(client_->Delete(fmt::format("/api/v1/runs/{}", edited_).c_str(), page)->status, 404);
}

TEST_F(WebWritesTest, WritesAreOffByDefaultAndTheTokenRuleHolds) {
  start(/*allow_writes=*/false);
  EXPECT_EQ(post(tagsPath(edited_), R"({"add": ["x"]})")->status, 405);
  EXPECT_EQ(run(edited_)["tags"], json::array());
  server_->stop();
  const std::string token = "0123456789abcdef0123";
  start(/*allow_writes=*/true, token);
  EXPECT_EQ(post(tagsPath(edited_), R"({"add": ["x"]})")->status, 401);
  EXPECT_EQ(
      post(tagsPath(edited_), R"({"add": ["x"]})", {{"Authorization", "Bearer " + token}})->status,
      200);
  // With a token, a name that is not loopback may be the one the browser used.
  EXPECT_EQ(post(tagsPath(edited_), R"({"add": ["y"]})",
                 {{"Authorization", "Bearer " + token},
                  {"Host", "ringmaster.example:1"},
                  {"Origin", "http://ringmaster.example:1"}})
                ->status,
            200);
}

}  // namespace
}  // namespace ringmaster::web
