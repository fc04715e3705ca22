// Issue 35: launch.scheduler {"kind": "slurm", ...} and launch.hosts[].proxy_jump. Every field is
// read and written back (parse(toJson(x)) == x), the world is nodes × ranks_per_node, launch.hosts
// beside a scheduler is refused, and every bad value of every field is refused naming its field.
#include <gtest/gtest.h>

#include <string>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "spec/job_spec.h"

namespace ringmaster {
namespace {

using json = nlohmann::json;

// A small engine job over `launch`.
json engineJob(json launch) {
  return {{"name", "slurm_ddp"},
          {"strategy", json::object()},
          {"model", {{"kind", "mlp"}, {"layers", {4, 8, 3}}}},
          {"data", {{"kind", "synthetic"}, {"samples", 64}, {"features", 4}, {"classes", 3}}},
          {"train", {{"steps", 10}, {"batch_size", 8}}},
          {"optimizer", {{"kind", "sgd"}, {"lr", 0.1}}},
          {"launch", std::move(launch)}};
}

// Every field of launch.scheduler set.
json fullScheduler() {
  return json::parse(R"({
    "kind": "slurm", "nodes": 2, "ranks_per_node": 3, "gpus_per_node": 8, "cpus_per_task": 4,
    "mem": "16G", "partition": "debug", "account": "proj-1", "qos": "normal",
    "time": "01:00:00", "constraint": "[a100|h100]&ib", "reservation": "r1", "job_name": "gpt.2",
    "extra_sbatch": ["--exclusive", "--mail-type=END"],
    "submit_from": {"host": "login1", "port": 2222, "user": "alice", "identity_file": "~/.ssh/id",
                    "password_auth": true, "proxy_jump": "bob@bastion.example.org:22"}
  })");
}

// The paths of a document's problems.
std::vector<std::string> problemPaths(const json& document) {
  std::vector<std::string> paths;
  for (const SpecProblem& problem : parseJobSpec(document).problems) paths.push_back(problem.path);
  return paths;
}

bool refusedAt(const json& document, const std::string& path) {
  const std::vector<std::string> paths = problemPaths(document);
  return std::find(paths.begin(), paths.end(), path) != paths.end();
}

TEST(SlurmSpec, EveryFieldIsReadAndWrittenBack) {
  const SpecParseResult parsed = parseJobSpec(engineJob({{"scheduler", fullScheduler()}}));
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const JobSpec& spec = *parsed.spec;
  ASSERT_TRUE(spec.launch.slurm.has_value());
  const SlurmSpec& slurm = *spec.launch.slurm;
  EXPECT_EQ(slurm.nodes, 2);
  EXPECT_EQ(slurm.ranks_per_node, 3);
  EXPECT_EQ(slurm.gpus_per_node, 8);
  EXPECT_EQ(slurm.cpus_per_task, 4);
  EXPECT_EQ(slurm.mem, "16G");
  EXPECT_EQ(slurm.partition, "debug");
  EXPECT_EQ(slurm.account, "proj-1");
  EXPECT_EQ(slurm.qos, "normal");
  EXPECT_EQ(slurm.time, "01:00:00");
  EXPECT_EQ(slurm.constraint, "[a100|h100]&ib");
  EXPECT_EQ(slurm.reservation, "r1");
  EXPECT_EQ(slurm.job_name, "gpt.2");
  EXPECT_EQ(slurm.extra_sbatch, (std::vector<std::string>{"--exclusive", "--mail-type=END"}));
  ASSERT_TRUE(slurm.submit_from.has_value());
  EXPECT_EQ(slurm.submit_from->host, "login1");
  EXPECT_EQ(slurm.submit_from->port, 2222);
  EXPECT_EQ(slurm.submit_from->user, "alice");
  EXPECT_EQ(slurm.submit_from->identity_file, "~/.ssh/id");
  EXPECT_TRUE(slurm.submit_from->password_auth);
  EXPECT_EQ(slurm.submit_from->proxy_jump, "bob@bastion.example.org:22");
  // The allocation is the world; the spec names no hosts.
  EXPECT_TRUE(spec.launch.hosts.empty());
  EXPECT_EQ(worldSize(spec), 6);
  EXPECT_EQ(nodeCount(spec), 2);
  EXPECT_EQ(ranksOnNode(spec, 1), 3);
  EXPECT_EQ(firstRankOnNode(spec, 1), 3);
  EXPECT_EQ(strategyLabel(spec), "ddp");  // the mesh's dp spans the 6 ranks
  EXPECT_EQ(spec.strategy.mesh.dp, 6);

  const json canonical = toJson(spec);
  EXPECT_FALSE(canonical["launch"].contains("hosts")) << canonical.dump();
  EXPECT_EQ(canonical["launch"]["scheduler"], fullScheduler());
  EXPECT_EQ(parseJobSpec(canonical).spec, spec);
  EXPECT_EQ(parseJobSpec(canonical.dump()).spec, spec);
  EXPECT_TRUE(validateJobSpec(spec).empty());
}

TEST(SlurmSpec, TheSmallestSchedulerIsOneNodeOfOneRankAndRoundTrips) {
  for (const json& launch :
       {json{{"scheduler", {{"kind", "slurm"}}}},
        json{{"scheduler", {{"kind", "slurm"}, {"nodes", 4}, {"submit_from", {{"host", "l"}}}}}}}) {
    const SpecParseResult parsed = parseJobSpec(engineJob(launch));
    ASSERT_TRUE(parsed.ok()) << parsed.describe();
    const json canonical = toJson(*parsed.spec);
    EXPECT_EQ(canonical["launch"]["scheduler"]["kind"], "slurm");
    EXPECT_EQ(canonical["launch"]["scheduler"]["ranks_per_node"], 1);
    EXPECT_FALSE(canonical["launch"]["scheduler"].contains("extra_sbatch"));
    EXPECT_EQ(parseJobSpec(canonical).spec, parsed.spec);
  }
  // A spec without a scheduler keeps its hosts and writes no scheduler.
  const SpecParseResult hosts = parseJobSpec(engineJob({{"hosts", {{{"ranks", 2}}}}}));
  ASSERT_TRUE(hosts.ok()) << hosts.describe();
  EXPECT_FALSE(hosts.spec->launch.slurm.has_value());
  EXPECT_FALSE(toJson(*hosts.spec)["launch"].contains("scheduler"));
  EXPECT_EQ(nodeCount(*hosts.spec), 1);
  EXPECT_EQ(worldSize(*hosts.spec), 2);
  // A null scheduler is none.
  EXPECT_TRUE(parseJobSpec(engineJob({{"scheduler", nullptr}})).ok());
}

TEST(SlurmSpec, HostsBesideASchedulerAreRefusedNamingLaunchHosts) {
  const SpecParseResult parsed = parseJobSpec(
      engineJob({{"hosts", {{{"ranks", 2}}}}, {"scheduler", {{"kind", "slurm"}, {"nodes", 2}}}}));
  ASSERT_EQ(parsed.problems.size(), 1u) << parsed.describe();
  EXPECT_EQ(parsed.problems[0].path, "launch.hosts");
  EXPECT_NE(parsed.problems[0].message.find("use one or the other"), std::string::npos);
}

TEST(SlurmSpec, AMisplacedSlurmKeyIsPointedToItsBlock) {
  json document = engineJob({{"scheduler", {{"kind", "slurm"}}}});
  document["partition"] = "gpu";
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_EQ(parsed.problems.size(), 1u) << parsed.describe();
  EXPECT_EQ(parsed.problems[0].path, "partition");
  EXPECT_EQ(parsed.problems[0].message,
            "unknown key (did you mean \"launch.scheduler.partition\"?)");
}

TEST(SlurmSpec, TheMeshIsCheckedAgainstTheAllocationNamingTheScheduler) {
  json document = engineJob({{"scheduler", {{"kind", "slurm"}, {"nodes", 2}}}});
  document["strategy"] = {{"mesh", {{"dp", 3}}}};
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_EQ(parsed.problems.size(), 1u) << parsed.describe();
  EXPECT_EQ(parsed.problems[0].path, "strategy.mesh");
  EXPECT_NE(parsed.problems[0].message.find("launch.scheduler gives a world size of 2"),
            std::string::npos)
      << parsed.describe();
  document["strategy"] = {{"kind", "single"}};
  EXPECT_TRUE(refusedAt(document, "strategy.kind"));
  // The product is bounded by the world-size limit, each factor by its own.
  document["strategy"] = json::object();
  document["launch"]["scheduler"]["nodes"] = kMaxSlurmNodes;
  document["launch"]["scheduler"]["ranks_per_node"] = kMaxWorldSize / kMaxSlurmNodes;
  EXPECT_TRUE(parseJobSpec(document).ok()) << parseJobSpec(document).describe();
  document["launch"]["scheduler"]["ranks_per_node"] = kMaxWorldSize / kMaxSlurmNodes + 1;
  EXPECT_EQ(problemPaths(document), std::vector<std::string>{"launch.scheduler"});
}

TEST(SlurmSpec, AProgramJobRunsUnderSlurmAndRestartsOnOneNodeOnly) {
  json document = {{"name", "torch"},
                   {"program", {{"script", "train.py"}}},
                   {"launch", {{"scheduler", {{"kind", "slurm"}, {"ranks_per_node", 4}}}}}};
  SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_EQ(strategyLabel(*parsed.spec), "ddp");
  EXPECT_EQ(worldSize(*parsed.spec), 4);
  EXPECT_EQ(parseJobSpec(toJson(*parsed.spec)).spec, parsed.spec);
  document["launch"]["max_restarts"] = 1;
  EXPECT_TRUE(parseJobSpec(document).ok());
  document["launch"]["scheduler"]["nodes"] = 2;
  EXPECT_TRUE(refusedAt(document, "launch.max_restarts"));
}

// Good values of each text field, in every form Slurm takes.
TEST(SlurmSpec, EachWordOfItsKindIsAccepted) {
  const std::vector<std::pair<std::string, std::vector<std::string>>> good = {
      {"mem", {"0", "16", "16G", "2000M", "1T", "512K"}},
      {"time", {"30", "30:00", "1:30:00", "2-0", "2-12:30", "2-00:00:00", "UNLIMITED", "infinite"}},
      {"partition", {"debug", "gpu-a100", "p.1", "a_b", "x+y", "q@c"}},
      {"constraint", {"a100", "[a100|h100]&ib", "intel*2", "!bigmem", "rack1:2,rack2"}},
      {"job_name", {std::string(kMaxSlurmJobName, 'j')}},
  };
  for (const auto& [key, values] : good) {
    for (const std::string& value : values) {
      json document = engineJob({{"scheduler", {{"kind", "slurm"}, {key, value}}}});
      const SpecParseResult parsed = parseJobSpec(document);
      EXPECT_TRUE(parsed.ok()) << key << " = " << value << ": " << parsed.describe();
    }
  }
  for (const std::string& item :
       {"--exclusive", "--mail-type=END,FAIL", "--gres=gpu:a100:8", "--comment=run-42",
        "--nodelist=n[1-4]", "--mem-per-gpu=8G", "--begin=now+1hour", "--dependency=afterok:42"}) {
    json document = engineJob({{"scheduler", {{"kind", "slurm"}, {"extra_sbatch", {item}}}}});
    EXPECT_TRUE(parseJobSpec(document).ok()) << item << ": " << parseJobSpec(document).describe();
  }
}

// Every bad value of every field is refused, naming the field (and the item of a list).
TEST(SlurmSpec, EveryBadValueIsRefusedNamingItsField) {
  const std::string long_name(kMaxSlurmJobName + 1, 'j');
  const std::string long_word(kMaxSlurmWordBytes + 1, 'p');
  const std::vector<std::pair<std::string, std::vector<json>>> bad = {
      {"kind", {"pbs", 1, nullptr}},
      {"nodes", {0, -1, kMaxSlurmNodes + 1, "2", 1.5, nullptr}},
      {"ranks_per_node", {0, kMaxWorldSize + 1, "1"}},
      {"gpus_per_node", {-1, kMaxSlurmGpusPerNode + 1, "8"}},
      {"cpus_per_task", {0, kMaxSlurmCpusPerTask + 1, true}},
      {"mem", {"", "16GB", "G", "-1", "16 G", "1.5G", "16g", 16}},
      {"time", {"", "1:2:3:4", "abc", "1-", "-1", "1-2-3", "1:", ":1", "1 h", "1-2:3:4:5", 30}},
      {"partition", {"", "a b", "-p", "a;b", "a'b", "a\"b", "a$b", "a/b", long_word, "a\nb", 1}},
      {"account", {"a b", "-x", "`id`"}},
      {"qos", {"a,b", "a|b"}},
      {"reservation", {"a&b", "r 1"}},
      {"job_name", {"-j", "a b", long_name, "j$"}},
      {"constraint", {"a b", "-a", "a$b", "a;b", "a\"b", "a'b", "a<b", "a>b", "a`b", "a\nb", ""}},
      {"extra_sbatch", {"--exclusive", json::object(), 1}},
      {"submit_from", {"login1", 1, json::array()}},
  };
  for (const auto& [key, values] : bad) {
    for (const json& value : values) {
      json scheduler = {{"kind", "slurm"}};
      scheduler[key] = value;
      const json document = engineJob({{"scheduler", scheduler}});
      EXPECT_TRUE(refusedAt(document, "launch.scheduler." + key))
          << key << " = " << value.dump() << ": " << parseJobSpec(document).describe();
    }
  }
  EXPECT_TRUE(refusedAt(engineJob({{"scheduler", {{"nodes", 2}}}}), "launch.scheduler.kind"));
  EXPECT_TRUE(refusedAt(engineJob({{"scheduler", "slurm"}}), "launch.scheduler"));
  EXPECT_TRUE(refusedAt(engineJob({{"scheduler", {{"kind", "slurm"}, {"nodez", 2}}}}),
                        "launch.scheduler.nodez"));
}

TEST(SlurmSpec, ExtraSbatchItemsAreOneOptionWordNotOneRingmasterSets) {
  const std::vector<std::string> refused = {
      // Not one --name=value word.
      "exclusive", "-N2", "-N 2", "-o/tmp/x", "---x", "--", "--=1", "--Exclusive", "--mail type",
      "--9lives", "--comment=", "--comment=a b", "--comment=a\tb", "--comment=a\nb",
      "--comment='x'", "--comment=\"x\"", "--comment=a\\b", "--comment=$HOME", "--comment=`id`",
      "--comment=a;b", "--comment=a&b", "--comment=a|b", "--comment=<x", "--comment=>x",
      "--comment=\x7f", "--comment=\xc3\xa9", "--comment=a#b", std::string(300, '-'),
      // The options Ringmaster sets, and what sbatch would take for them.
      "--nodes=2", "--ntasks=4", "--ntasks-per-node=2", "--output=/tmp/x", "--error=/tmp/x",
      "--parsable", "--wrap=touch CANARY", "--chdir=/", "--export=ALL", "--array=1-4", "--node=2",
      "--nod=2", "--n=2", "--ntasks-per=2", "--out=/tmp/x", "--err=x", "--wra=x", "--chd=/",
      "--exp=NONE", "--arr=1-2", "--parsab",
      // What makes sbatch print instead of submit.
      "--help", "--usage", "--version", "--vers"};
  for (const std::string& item : refused) {
    const json document =
        engineJob({{"scheduler", {{"kind", "slurm"}, {"extra_sbatch", {"--exclusive", item}}}}});
    const SpecParseResult parsed = parseJobSpec(document);
    ASSERT_EQ(parsed.problems.size(), 1u) << item << ": " << parsed.describe();
    EXPECT_EQ(parsed.problems[0].path, "launch.scheduler.extra_sbatch[1]") << item;
    EXPECT_FALSE(parsed.problems[0].message.empty());
  }
  const SpecParseResult set = parseJobSpec(
      engineJob({{"scheduler", {{"kind", "slurm"}, {"extra_sbatch", {"--nodes=4"}}}}}));
  ASSERT_FALSE(set.ok());
  EXPECT_NE(set.problems[0].message.find("set by Ringmaster"), std::string::npos) << set.describe();
  json many = engineJob({{"scheduler", {{"kind", "slurm"}}}});
  many["launch"]["scheduler"]["extra_sbatch"] =
      std::vector<std::string>(kMaxExtraSbatch + 1, "--exclusive");
  EXPECT_TRUE(refusedAt(many, "launch.scheduler.extra_sbatch"));
}

TEST(SlurmSpec, TheLoginNodeIsAHostEntryWithoutRanks) {
  const std::vector<std::pair<std::string, std::vector<json>>> bad = {
      {"host", {"", "-oProxyCommand=x", "a b", "a;b", 1}},
      {"user", {"", "-u", "a b", "a@b"}},
      {"port", {0, 65536, "22"}},
      {"password_auth", {"yes"}},
      {"identity_file", {""}},
      {"proxy_jump",
       {"", "a b", "-J", "h:0", "h:65536", "h:", "h:x", "@h", "u@", "a@b@c", "[::1", "[::1]x",
        "h1,h2", "h;id", "$(id)"}},
      {"ranks", {2}},
  };
  for (const auto& [key, values] : bad) {
    for (const json& value : values) {
      json login = {{"host", "login1"}};
      login[key] = value;
      const json document = engineJob({{"scheduler", {{"kind", "slurm"}, {"submit_from", login}}}});
      EXPECT_TRUE(refusedAt(document, "launch.scheduler.submit_from." + key))
          << key << " = " << value.dump() << ": " << parseJobSpec(document).describe();
    }
  }
  EXPECT_TRUE(
      refusedAt(engineJob({{"scheduler", {{"kind", "slurm"}, {"submit_from", {{"port", 22}}}}}}),
                "launch.scheduler.submit_from.host"));
}

TEST(SlurmSpec, AProxyJumpIsOneBastionOnALoginNodeOrAnyHost) {
  for (const std::string& jump :
       {"bastion", "bastion.example.org", "alice@bastion", "alice@bastion:2222", "10.0.0.1:22",
        "[::1]:22", "[fe80::1]", "fe80::1", "a_b-c.d"}) {
    const json login = engineJob(
        {{"scheduler",
          {{"kind", "slurm"}, {"submit_from", {{"host", "login1"}, {"proxy_jump", jump}}}}}});
    const SpecParseResult parsed = parseJobSpec(login);
    ASSERT_TRUE(parsed.ok()) << jump << ": " << parsed.describe();
    EXPECT_EQ(parsed.spec->launch.slurm->submit_from->proxy_jump, jump);
    const json host =
        engineJob({{"hosts", {{{"host", "gpu1"}, {"ranks", 1}, {"proxy_jump", jump}}}}});
    const SpecParseResult on_host = parseJobSpec(host);
    ASSERT_TRUE(on_host.ok()) << jump << ": " << on_host.describe();
    EXPECT_EQ(on_host.spec->launch.hosts[0].proxy_jump, jump);
    EXPECT_EQ(toJson(*on_host.spec)["launch"]["hosts"][0]["proxy_jump"], jump);
    EXPECT_EQ(parseJobSpec(toJson(*on_host.spec)).spec, on_host.spec);
  }
  const json bad =
      engineJob({{"hosts", {{{"host", "gpu1"}, {"ranks", 1}, {"proxy_jump", "a b"}}}}});
  EXPECT_TRUE(refusedAt(bad, "launch.hosts[0].proxy_jump"));
}

}  // namespace
}  // namespace ringmaster
