// Issue 35: what `ringmaster hosts check` reads from a host's sinfo. The parser against output
// captured from a real Slurm 22.05.8 cluster (Debian 12's slurmctld and slurmd, started by hand
// on this machine as docs/slurm.md shows, with three nodes, partitions debug (default, n[1-2]),
// gpu (n[2-3], n3's slurmd not started) and maint (DOWN, n1), and one job holding a CPU of n1),
// every malformed line refused naming it; and querySlurmCluster for real on this machine: with
// no sinfo on the PATH, and with a sinfo that has no cluster to ask.
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <string>
#include <vector>

#include "core/error.h"
#include "process/child_process.h"
#include "slurm/sinfo.h"

namespace ringmaster::slurm {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

// `sinfo --noheader --format=%P|%a|%F` on that cluster.
constexpr const char* kCapturedPartitions =
    "debug*|up|1/1/0/2\n"
    "gpu|up|0/2/0/2\n"
    "maint|down|1/0/0/1\n";
// `sinfo --version` there.
constexpr const char* kCapturedVersion = "slurm-wlm 22.05.8\n";

TEST(Sinfo, ReadsTheVersion) {
  EXPECT_EQ(parseSinfoVersion(kCapturedVersion), "22.05.8");
  EXPECT_EQ(parseSinfoVersion("slurm 23.02.1\n"), "23.02.1");
  EXPECT_EQ(parseSinfoVersion(""), "");
  EXPECT_EQ(parseSinfoVersion("sinfo: fatal: Could not establish a configuration source\n"), "");
  EXPECT_EQ(parseSinfoVersion("slurm-wlm\n"), "");
}

TEST(Sinfo, ReadsEachPartitionWithItsIdleAndTotalNodes) {
  const std::vector<SlurmPartition> partitions = parseSinfoPartitions(kCapturedPartitions);
  ASSERT_EQ(partitions.size(), 3u);
  EXPECT_EQ(partitions[0], (SlurmPartition{.name = "debug",
                                           .is_default = true,
                                           .availability = "up",
                                           .allocated = 1,
                                           .idle = 1,
                                           .other = 0,
                                           .total = 2}));
  EXPECT_EQ(partitions[1].name, "gpu");
  EXPECT_FALSE(partitions[1].is_default);
  EXPECT_EQ(partitions[1].idle, 2);
  EXPECT_EQ(partitions[2].name, "maint");
  EXPECT_EQ(partitions[2].availability, "down");
  EXPECT_EQ(partitions[2].idle, 0);
  EXPECT_EQ(partitions[2].total, 1);
}

TEST(Sinfo, AddsUpThePartitionsLinesAndTakesNoneFromNoOutput) {
  const auto partitions = parseSinfoPartitions("a|up|1/0/1/2\r\na|up|0/3/0/3\n\nb*|inact|0/0/0/0");
  ASSERT_EQ(partitions.size(), 2u);
  EXPECT_EQ(partitions[0].allocated, 1);
  EXPECT_EQ(partitions[0].idle, 3);
  EXPECT_EQ(partitions[0].other, 1);
  EXPECT_EQ(partitions[0].total, 5);
  EXPECT_TRUE(partitions[1].is_default);
  EXPECT_TRUE(parseSinfoPartitions("").empty());
}

TEST(Sinfo, RefusesEveryMalformedLineNamingIt) {
  for (const char* line :
       {"debug", "debug|up", "debug|up|1/1/0", "debug|up|1/1/0/2/3", "|up|1/1/0/2",
        "debug|up|1/x/0/2", "debug|up|1/-1/0/2", "debug|up|1/1/0/99999999999",
        "debug|up|1/1/0/2|extra", "PARTITION AVAIL NODES(A/I/O/T)"}) {
    SCOPED_TRACE(line);
    try {
      parseSinfoPartitions(std::string("ok|up|0/1/0/1\n") + line + "\n");
      ADD_FAILURE() << "accepted";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
      EXPECT_NE(e.message().find("line 2"), std::string::npos) << e.message();
    }
  }
}

TEST(Sinfo, QueriesThroughTheHostsCommandsAsGiven) {
  std::vector<std::vector<std::string>> asked;
  const auto info = querySlurmCluster([&](const std::vector<std::string>& argv) {
    asked.push_back(argv);
    if (argv[0] == "sh") return CommandOutput{};
    if (argv[1] == "--version") return CommandOutput{.out = kCapturedVersion};
    return CommandOutput{.out = kCapturedPartitions};
  });
  ASSERT_TRUE(info);
  EXPECT_EQ(info->version, "22.05.8");
  EXPECT_EQ(info->partitions.size(), 3u);
  EXPECT_EQ(info->error, "");
  ASSERT_EQ(asked.size(), 3u);
  EXPECT_EQ(asked[2], sinfoPartitionsCommand());
}

// The environment variable PATH set for one test, restored after.
class ScopedPath {
 public:
  explicit ScopedPath(const std::string& value) : old_(std::getenv("PATH")) {
    ::setenv("PATH", value.c_str(), 1);
  }
  ~ScopedPath() { ::setenv("PATH", old_.c_str(), 1); }

 private:
  std::string old_;
};

TEST(Sinfo, AHostWithoutSinfoHasNoSlurm) {
  char pattern[] = "/tmp/rm-sinfo-XXXXXX";
  const fs::path dir = ::mkdtemp(pattern);
  fs::create_symlink("/bin/sh", dir / "sh");  // a PATH with a shell and nothing else
  auto host = localSlurmHost();
  {
    ScopedPath path(dir.string());
    EXPECT_FALSE(querySlurmCluster(
        [&](const std::vector<std::string>& argv) { return host->run(argv, 30s); }));
  }
  fs::remove_all(dir);
}

TEST(Sinfo, ASinfoWithoutAClusterSaysWhy) {
  if (!findExecutable("sinfo")) GTEST_SKIP() << "no sinfo here (apt-get install slurm-client)";
  if (fs::exists("/etc/slurm/slurm.conf")) GTEST_SKIP() << "this machine has a Slurm cluster";
  ::unsetenv("SLURM_CONF");
  auto host = localSlurmHost();
  const auto info =
      querySlurmCluster([&](const std::vector<std::string>& argv) { return host->run(argv, 30s); });
  ASSERT_TRUE(info);
  EXPECT_TRUE(info->partitions.empty());
  EXPECT_NE(info->error.find("sinfo failed (exit code"), std::string::npos) << info->error;
  EXPECT_NE(info->error.find("fatal"), std::string::npos) << info->error;
}

}  // namespace
}  // namespace ringmaster::slurm
