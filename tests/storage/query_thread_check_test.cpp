// setQueryThreadCheck (issue 17): a thread the installed check refuses can neither open a database
// nor run a statement, an exec or a data_version poll on one; other threads can, and
// AllowQueriesOnThisThread lets a refused thread query while it lives.
#include <gtest/gtest.h>

#include <thread>

#include "core/error.h"
#include "db/database.h"
#include "db/statement.h"
#include "storage/storage_test_support.h"

namespace ringmaster::storage {
namespace {

std::thread::id refused_thread;

bool notTheRefusedThread() {
  return std::this_thread::get_id() != refused_thread;
}

class QueryThreadCheckTest : public testing::StorageTest {
 protected:
  void SetUp() override {
    testing::StorageTest::SetUp();
    refused_thread = std::this_thread::get_id();
  }
  void TearDown() override {
    setQueryThreadCheck(nullptr);
    testing::StorageTest::TearDown();
  }
  std::string path() const { return (dir_ / "runs.db").string(); }
};

void expectRefused(const std::function<void()>& body) {
  try {
    body();
    ADD_FAILURE() << "the refused thread queried";
  } catch (const Error& e) {
    EXPECT_EQ(e.kind(), ErrorKind::kInternal) << e.what();
    EXPECT_NE(std::string(e.what()).find("must not"), std::string::npos) << e.what();
  }
}

TEST_F(QueryThreadCheckTest, ARefusedThreadCannotOpenQueryOrWrite) {
  Database db(path());
  setQueryThreadCheck(&notTheRefusedThread);
  expectRefused([&] { Database another(path()); });
  expectRefused([&] { Database reader(path(), readingOptions(path())); });
  expectRefused([&] { Statement(db, "SELECT 1").run(); });
  expectRefused([&] { db.exec("CREATE TABLE t (x)"); });
  expectRefused([&] { (void)db.dataVersion(); });
  expectRefused([&] { (void)db.schemaVersion(); });
}

TEST_F(QueryThreadCheckTest, OtherThreadsQueryAndAnAllowanceLetsThisOne) {
  { Database create(path()); }
  setQueryThreadCheck(&notTheRefusedThread);
  int64_t version = -1;
  std::thread worker([&] {
    Database db(path(), readingOptions(path()));
    Statement select(db, "SELECT 41 + 1");
    if (select.run()) version = select.columnInt(0);
  });
  worker.join();
  EXPECT_EQ(version, 42);
  {
    AllowQueriesOnThisThread allow;
    Database db(path());
    EXPECT_NO_THROW(db.exec("CREATE TABLE t (x)"));
  }
  expectRefused([&] { Database again(path()); });
  setQueryThreadCheck(nullptr);
  EXPECT_NO_THROW(Database(path()).exec("DROP TABLE t"));
}

}  // namespace
}  // namespace ringmaster::storage
