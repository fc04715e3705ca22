// The one rule for "is this host this machine" (isLocalHost, runsLocally) that the run session
// and the window's host checks share.
#include <gtest/gtest.h>

#include "launcher/local_launcher.h"

namespace ringmaster {
namespace {

LaunchHostSpec host(std::string name) {
  LaunchHostSpec spec;
  spec.host = std::move(name);
  return spec;
}

TEST(LocalHost, TheLoopbackNamesWithoutSshSettingsAreThisMachine) {
  for (const char* name : {"localhost", "127.0.0.1", "::1"})
    EXPECT_TRUE(isLocalHost(host(name))) << name;
  for (const char* name : {"gpu-box", "127.0.0.2", "localhost.localdomain", ""})
    EXPECT_FALSE(isLocalHost(host(name))) << name;
  LaunchHostSpec with_port = host("localhost");
  with_port.port = 2222;
  LaunchHostSpec with_user = host("127.0.0.1");
  with_user.user = "alice";
  LaunchHostSpec with_key = host("::1");
  with_key.identity_file = "~/.ssh/id_ed25519";
  for (const LaunchHostSpec& over_ssh : {with_port, with_user, with_key})
    EXPECT_FALSE(isLocalHost(over_ssh)) << over_ssh.host;
}

TEST(LocalHost, AJobRunsLocallyOnlyOnOneLocalHost) {
  LaunchSpec launch;  // the default: one localhost
  EXPECT_TRUE(runsLocally(launch));
  launch.hosts = {host("localhost"), host("localhost")};
  EXPECT_FALSE(runsLocally(launch));  // two "hosts" are two SSH connections, even to here
  launch.hosts = {host("gpu-box")};
  EXPECT_FALSE(runsLocally(launch));
  launch.hosts.clear();
  EXPECT_FALSE(runsLocally(launch));
  // Issue 35: a Slurm job goes to the scheduler, even with a local host left in its hosts.
  launch.hosts = {host("localhost")};
  launch.slurm = SlurmSpec{};
  EXPECT_FALSE(runsLocally(launch));
}

}  // namespace
}  // namespace ringmaster
