// launch.env and launch.env_file (issue 21, per-job environment): a valid map and file path
// round-trip through the canonical form; every refused name (malformed, one Ringmaster sets, one
// that looks secret) is reported at launch.env.NAME saying why; values are kept byte for byte.
#include <gtest/gtest.h>

#include <string>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "spec/job_spec.h"

namespace ringmaster {
namespace {

using nlohmann::json;

json jobWithEnv(const json& env) {
  json document = json::parse(R"({
    "name": "env-job",
    "program": {"script": "train.py"},
    "launch": {"hosts": [{"host": "localhost", "ranks": 2}]}
  })");
  document["launch"]["env"] = env;
  return document;
}

// The one problem of `document`, which must be at `path`.
std::string onlyProblemAt(const json& document, const std::string& path) {
  const SpecParseResult parsed = parseJobSpec(document);
  EXPECT_FALSE(parsed.ok()) << document.dump();
  if (parsed.problems.size() != 1) {
    ADD_FAILURE() << "expected one problem at " << path << ", got:\n" << parsed.describe();
    return {};
  }
  EXPECT_EQ(parsed.problems[0].path, path) << parsed.describe();
  return parsed.problems[0].message;
}

TEST(LaunchEnv, AMapAndAnEnvFileRoundTripThroughTheCanonicalForm) {
  const std::string hostile =
      "a b 'single' \"double\" $(touch /tmp/pwned) `id` ${HOME} \\ ;|&\n\tx";
  json document = jobWithEnv({{"NCCL_DEBUG", "INFO"},
                              {"OMP_NUM_THREADS", "3"},
                              {"PYTHONPATH", "/srv/lib"},
                              {"_under", ""},
                              {"HOSTILE", hostile}});
  document["launch"]["env_file"] = "secrets/run.env";
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  const LaunchSpec& launch = parsed.spec->launch;
  ASSERT_EQ(launch.env.size(), 5u);
  EXPECT_EQ(launch.env.at("NCCL_DEBUG"), "INFO");
  EXPECT_EQ(launch.env.at("_under"), "");
  EXPECT_EQ(launch.env.at("HOSTILE"), hostile);
  EXPECT_EQ(launch.env_file, "secrets/run.env");

  const json canonical = toJson(*parsed.spec);
  EXPECT_EQ(canonical["launch"]["env"]["HOSTILE"], hostile);
  EXPECT_EQ(canonical["launch"]["env_file"], "secrets/run.env");
  const SpecParseResult again = parseJobSpec(canonical.dump());
  ASSERT_TRUE(again.ok()) << again.describe();
  EXPECT_EQ(*again.spec, *parsed.spec);
  EXPECT_EQ(toJson(*again.spec), canonical);
}

TEST(LaunchEnv, LeftOutOrEmptyItIsNotWrittenSoOlderSpecsCompareEqual) {
  json document = jobWithEnv(json::object());
  const SpecParseResult parsed = parseJobSpec(document);
  ASSERT_TRUE(parsed.ok()) << parsed.describe();
  EXPECT_TRUE(parsed.spec->launch.env.empty());
  EXPECT_FALSE(parsed.spec->launch.env_file.has_value());
  const json canonical = toJson(*parsed.spec);
  EXPECT_FALSE(canonical["launch"].contains("env"));
  EXPECT_FALSE(canonical["launch"].contains("env_file"));
  // An engine job takes it the same way.
  json engine = json::parse(R"({"name": "e", "strategy": {"kind": "single"},
    "model": {"kind": "mlp", "layers": [4, 2]},
    "data": {"kind": "synthetic", "samples": 8, "features": 4, "classes": 2},
    "train": {"steps": 1, "batch_size": 2}, "optimizer": {"kind": "sgd", "lr": 0.1},
    "launch": {"env": {"NCCL_DEBUG": "WARN"}, "env_file": "/etc/job.env"}})");
  const SpecParseResult engine_parsed = parseJobSpec(engine);
  ASSERT_TRUE(engine_parsed.ok()) << engine_parsed.describe();
  EXPECT_EQ(engine_parsed.spec->launch.env.at("NCCL_DEBUG"), "WARN");
  EXPECT_EQ(toJson(*engine_parsed.spec)["launch"]["env_file"], "/etc/job.env");
}

TEST(LaunchEnv, EveryVariableRingmasterSetsIsRefusedNamingIt) {
  for (const char* name :
       {"MASTER_ADDR", "MASTER_PORT", "RANK", "WORLD_SIZE", "LOCAL_RANK", "LOCAL_WORLD_SIZE",
        "NODE_RANK", "GROUP_RANK", "GROUP_WORLD_SIZE", "ROLE_RANK", "ROLE_WORLD_SIZE", "ROLE_NAME",
        "TORCHELASTIC_RESTART_COUNT", "TORCHELASTIC_MAX_RESTARTS", "TORCHELASTIC_USE_AGENT_STORE",
        "RINGMASTER_TELEMETRY_FD", "RINGMASTER_VERSION", "RINGMASTER_STRATEGY"}) {
    SCOPED_TRACE(name);
    const std::string message =
        onlyProblemAt(jobWithEnv({{name, "1"}}), fmt::format("launch.env.{}", name));
    EXPECT_NE(message.find("set by Ringmaster"), std::string::npos) << message;
    EXPECT_NE(message.find("cannot be overridden"), std::string::npos) << message;
  }
  // Names that only resemble them are the user's.
  const SpecParseResult near = parseJobSpec(
      jobWithEnv({{"RANKS", "1"}, {"MY_RANK", "1"}, {"master_addr", "x"}, {"LOCAL_DIR", "/x"}}));
  EXPECT_TRUE(near.ok()) << near.describe();
}

TEST(LaunchEnv, SecretLookingNamesAreRefusedWithAPointerToEnvFile) {
  for (const char* name : {"HF_TOKEN", "WANDB_API_KEY", "db_password", "MY_PASSWD", "AWS_SECRET",
                           "GOOGLE_APPLICATION_CREDENTIALS", "apikey", "Token"}) {
    SCOPED_TRACE(name);
    const std::string message =
        onlyProblemAt(jobWithEnv({{name, "hunter2"}}), fmt::format("launch.env.{}", name));
    EXPECT_NE(message.find("looks like a secret"), std::string::npos) << message;
    EXPECT_NE(message.find("launch.env_file"), std::string::npos) << message;
    // The value is never repeated in the message.
    EXPECT_EQ(message.find("hunter2"), std::string::npos) << message;
  }
}

TEST(LaunchEnv, MalformedNamesAndValuesAreRefusedAtTheirPath) {
  for (const char* name : {"1ABC", "A-B", "A B", "A=B", "$(x)", "É"}) {
    SCOPED_TRACE(name);
    const std::string message =
        onlyProblemAt(jobWithEnv({{name, "v"}}), fmt::format("launch.env.{}", name));
    EXPECT_NE(message.find("not an environment variable name"), std::string::npos) << message;
  }
  EXPECT_NE(onlyProblemAt(jobWithEnv({{"", "v"}}), "launch.env.").find("empty"), std::string::npos);
  EXPECT_NE(onlyProblemAt(jobWithEnv({{"A", 3}}), "launch.env.A").find("expected a string"),
            std::string::npos);
  EXPECT_NE(onlyProblemAt(jobWithEnv({{"A", nullptr}}), "launch.env.A").find("expected a string"),
            std::string::npos);
  EXPECT_NE(onlyProblemAt(jobWithEnv({{"A", std::string("x\0y", 3)}}), "launch.env.A").find("NUL"),
            std::string::npos);
  EXPECT_NE(
      onlyProblemAt(jobWithEnv(json::array({"A=1"})), "launch.env").find("expected an object"),
      std::string::npos);
  EXPECT_NE(onlyProblemAt(jobWithEnv("A=1"), "launch.env").find("expected an object"),
            std::string::npos);
  // Every problem is reported at once, each at its own name.
  const SpecParseResult several =
      parseJobSpec(jobWithEnv({{"RANK", "0"}, {"HF_TOKEN", "t"}, {"OK", "fine"}, {"9", "x"}}));
  ASSERT_EQ(several.problems.size(), 3u) << several.describe();
  EXPECT_EQ(several.problems[0].path, "launch.env.9");
  EXPECT_EQ(several.problems[1].path, "launch.env.HF_TOKEN");
  EXPECT_EQ(several.problems[2].path, "launch.env.RANK");
}

TEST(LaunchEnv, CountsAndSizesAreBounded) {
  // At the bounds: accepted.
  json at_bounds = json::object();
  for (int64_t i = 0; i < kMaxEnvVariables - 1; ++i) at_bounds[fmt::format("V{}", i)] = "x";
  at_bounds[std::string(static_cast<size_t>(kMaxEnvNameLength), 'N')] =
      std::string(static_cast<size_t>(kMaxEnvValueBytes), 'v');
  EXPECT_TRUE(parseJobSpec(jobWithEnv(at_bounds)).ok());
  // One more variable, one more character of a name, one more byte of a value: refused.
  json too_many = at_bounds;
  too_many["ONE_MORE"] = "x";
  EXPECT_NE(onlyProblemAt(jobWithEnv(too_many), "launch.env").find("at most 256 variables"),
            std::string::npos);
  const std::string long_name(static_cast<size_t>(kMaxEnvNameLength) + 1, 'N');
  EXPECT_NE(onlyProblemAt(jobWithEnv({{long_name, "v"}}),
                          fmt::format("launch.env.{}...", long_name.substr(0, 64)))
                .find("at most 256 characters"),
            std::string::npos);
  EXPECT_NE(onlyProblemAt(
                jobWithEnv({{"BIG", std::string(static_cast<size_t>(kMaxEnvValueBytes) + 1, 'v')}}),
                "launch.env.BIG")
                .find("at most 32768 bytes"),
            std::string::npos);
}

TEST(LaunchEnv, EnvFileIsANonEmptyPath) {
  json document = jobWithEnv(json::object());
  document["launch"]["env_file"] = "";
  EXPECT_NE(onlyProblemAt(document, "launch.env_file").find("non-empty string"), std::string::npos);
  document["launch"]["env_file"] = 7;
  EXPECT_NE(onlyProblemAt(document, "launch.env_file").find("non-empty string"), std::string::npos);
  document["launch"]["env_file"] = nullptr;  // null: none
  EXPECT_TRUE(parseJobSpec(document).ok());
}

TEST(LaunchEnv, CheckEnvNameAllowsSecretsOnlyWhenAsked) {
  EXPECT_TRUE(checkEnvName("HF_TOKEN", false).has_value());
  EXPECT_FALSE(checkEnvName("HF_TOKEN", true).has_value());
  // Ringmaster's own names stay refused in an env_file too.
  EXPECT_TRUE(checkEnvName("MASTER_PORT", true).has_value());
  EXPECT_TRUE(checkEnvName("TORCHELASTIC_MAX_RESTARTS", true).has_value());
  EXPECT_FALSE(checkEnvName("NCCL_DEBUG", false).has_value());
}

}  // namespace
}  // namespace ringmaster
