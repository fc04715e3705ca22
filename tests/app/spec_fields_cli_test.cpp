// `ringmaster spec fields` run as a real program: the text and the JSON list every field of the
// spec's description (spec/spec_fields.h), the same table the job editor builds its form from.
#include <gtest/gtest.h>

#include <chrono>
#include <string>

#include <nlohmann/json.hpp>

#include "cli/spec_command.h"
#include "common/captured_process.h"
#include "common/test_paths.h"
#include "spec/spec_fields.h"

namespace ringmaster {
namespace {

using namespace std::chrono_literals;
using json = nlohmann::json;
using testing::CapturedProcess;
using testing::exitedWith;

const std::string kRingmaster = std::string(ringmaster::testBinaryDir()) + "/app/ringmaster";

TEST(SpecFieldsCli, JsonListsEveryDescribedFieldWithItsDefaultAndChoices) {
  CapturedProcess process(kRingmaster, {"spec", "fields", "--json"});
  const ExitStatus status = process.wait(30s);
  ASSERT_TRUE(exitedWith(status, 0)) << status.describe() << process.err();
  const json fields = json::parse(process.out());
  ASSERT_EQ(fields.size(), specFields().size());
  EXPECT_EQ(fields, cli::specFieldsJson());
  for (size_t i = 0; i < fields.size(); ++i) {
    const SpecField& field = specFields()[i];
    EXPECT_EQ(fields[i]["path"], field.path);
    EXPECT_EQ(fields[i]["type"], std::string(toString(field.type)));
    EXPECT_EQ(fields[i]["required"], field.required);
    EXPECT_EQ(fields[i].value("default", json()), field.default_value) << field.path;
  }
  EXPECT_EQ(fields[0]["path"], "name");  // form order
  for (const json& field : fields) {
    if (field["path"] == "strategy.kind") {  // a program job's: what its script does
      EXPECT_EQ(field["choices"], json({"single", "ddp", "fsdp", "pipeline"}));
      EXPECT_EQ(field["job"], "program");
    }
    if (field["path"] == "strategy.dp.kind") {  // the registered data-parallel plans
      EXPECT_EQ(field["choices"], json({"ddp", "fsdp"}));
      EXPECT_EQ(field["default"], "ddp");
    }
    if (field["path"] == "strategy.dp.bucket_cap_mb") {
      EXPECT_EQ(field["default"], 25);
      EXPECT_EQ(field["when"], json({{"controller", "strategy.dp.kind"}, {"kinds", {"ddp"}}}));
    }
    if (field["path"] == "program.script") {
      EXPECT_EQ(field["job"], "program");
      EXPECT_EQ(field["required"], true);
    }
    if (field["path"] == "launch.hosts") EXPECT_FALSE(field.contains("job"));
    if (field["path"] == "optimizer.weight_decay") {
      EXPECT_EQ(field["job"], "engine");
      EXPECT_EQ(field["default"], 0);
      EXPECT_EQ(field["defaults_when"][0]["value"], 0.01);
    }
  }
}

TEST(SpecFieldsCli, TextNamesEveryFieldWithTypeDefaultAndHelp) {
  CapturedProcess process(kRingmaster, {"spec", "fields"});
  const ExitStatus status = process.wait(30s);
  ASSERT_TRUE(exitedWith(status, 0)) << status.describe() << process.err();
  const std::string out = process.out();
  EXPECT_EQ(out, cli::specFieldsText());
  for (const SpecField& field : specFields()) {
    EXPECT_NE(out.find("  " + field.path + "  " + field.label + ": "), std::string::npos)
        << field.path;
    if (!field.help.empty()) EXPECT_NE(out.find(field.help), std::string::npos) << field.path;
  }
  EXPECT_NE(out.find("  strategy.dp.bucket_cap_mb  Bucket cap (MiB): number in (0, 65536]; "
                     "default 25; only when strategy.dp.kind is ddp; engine jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  optimizer.weight_decay  Weight decay: number >= 0; default 0 (0.01 when "
                     "optimizer.kind is adamw); engine jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  model.dropout  Dropout: number in [0, 1); default 0; engine jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  data.kind  Kind: choice; required; synthetic | idx | tokens | text; "
                     "engine jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  model.seed  Seed: integer >= 0; default 0; engine jobs only\n"),
            std::string::npos)
      << out;
  // A program job's section (issue 19), and the fields both kinds of job read.
  EXPECT_NE(out.find("\nProgram\n  program.python  Python: text; default python3; program jobs "
                     "only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  program.script  Script: path; required; program jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  program.args  Arguments: text list; default []; program jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  program.steps  Steps: integer in [0, 1000000000]; default 0; program "
                     "jobs only\n"),
            std::string::npos)
      << out;
  EXPECT_NE(out.find("  name  Name: text; required\n"), std::string::npos) << out;
}

TEST(SpecFieldsCli, SpecWithoutASubcommandIsAUsageError) {
  CapturedProcess process(kRingmaster, {"spec"});
  EXPECT_TRUE(exitedWith(process.wait(30s), 2)) << process.err();
}

}  // namespace
}  // namespace ringmaster
