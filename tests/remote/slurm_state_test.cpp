// Slurm's answers as SlurmLaunch reads them: squeue's JSON and text forms, sacct's (accounting
// and jobcomp), sbatch --parsable, and the run status of every state. The texts are the real
// commands' output, captured from Slurm 22.05.8 (Debian 12) on a test cluster of two nodes
// (tests/common/slurm_cluster.h), trimmed to the fields read.
#include <gtest/gtest.h>

#include "core/error.h"
#include "slurm/slurm_state.h"

namespace ringmaster::slurm {
namespace {

// `squeue --json` while job 4245 ran on both nodes and 4246 waited for them (22.05 lists every
// job, whatever --jobs says).
constexpr char kSqueueJson[] =
    R"({"meta": {"plugin": {"type": "openapi/v0.0.38", "name": "Slurm OpenAPI v0.0.38"},
"Slurm": {"version": {"major": 22, "micro": 8, "minor": 5}, "release": "22.05.8"}}, "errors": [],
"jobs": [{"job_id": 4243, "job_state": "CANCELLED", "state_reason": "None", "nodes": "n[1-2]",
"exit_code": 15, "derived_exit_code": 0, "name": "wrap", "partition": "debug"},
{"job_id": 4245, "job_state": "RUNNING", "state_reason": "None", "nodes": "n[1-2]",
"exit_code": 0, "derived_exit_code": 0, "name": "wrap", "partition": "debug"},
{"job_id": 4246, "job_state": "PENDING", "state_reason": "Resources", "nodes": "",
"exit_code": 0, "derived_exit_code": 0, "name": "wrap", "partition": "debug"}]})";

TEST(SlurmState, SqueueJsonFindsTheJobAmongAllItLists) {
  EXPECT_EQ(parseSqueueJson(kSqueueJson, "4246"),
            (SlurmJobState{.job_id = "4246", .state = "PENDING", .reason = "Resources"}));
  EXPECT_EQ(parseSqueueJson(kSqueueJson, "4245"),
            (SlurmJobState{.job_id = "4245", .state = "RUNNING", .nodes = "n[1-2]"}));
  EXPECT_EQ(parseSqueueJson(kSqueueJson, "424"), std::nullopt);
  EXPECT_EQ(parseSqueueJson(kSqueueJson, "9999"), std::nullopt);
}

TEST(SlurmState, SqueueJsonOfLaterSlurmsListsTheStateAsWords) {
  // 23.02 and later: "job_state": ["PENDING"], "job_id" still a number.
  const std::string later =
      R"({"jobs": [{"job_id": 7, "job_state": ["RUNNING", "COMPLETING"], "state_reason": "None",
          "nodes": "gpu[01-04]"}]})";
  EXPECT_EQ(parseSqueueJson(later, "7"),
            (SlurmJobState{.job_id = "7", .state = "RUNNING", .nodes = "gpu[01-04]"}));
}

TEST(SlurmState, SqueueJsonThatIsNotSqueuesIsAnErrorSayingSo) {
  for (const std::string text : {"squeue: error: unrecognized option '--json'", "{}",
                                 R"({"jobs": 3})", R"({"jobs": [{"job_id": 1}]})"}) {
    try {
      parseSqueueJson(text, "1");
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat) << text;
      EXPECT_NE(e.message().find("squeue --json"), std::string::npos) << e.message();
    }
  }
}

TEST(SlurmState, SqueueTextFormAndSacctLines) {
  // squeue --noheader --format=%i|%T|%r|%N
  EXPECT_EQ(parseSqueueText("4248|PENDING|PartitionConfig|\n", "4248"),
            (SlurmJobState{.job_id = "4248", .state = "PENDING", .reason = "PartitionConfig"}));
  EXPECT_EQ(parseSqueueText("4245|RUNNING|None|n[1-2]\n4246|PENDING|Resources|\n", "4245"),
            (SlurmJobState{.job_id = "4245", .state = "RUNNING", .nodes = "n[1-2]"}));
  EXPECT_EQ(parseSqueueText("", "4245"), std::nullopt);
  // sacct -c -P -n -o JobID,State,ExitCode,NodeList (the jobcomp file), and with accounting its
  // steps' lines beside the allocation's.
  EXPECT_EQ(parseSacct("4247|FAILED|3:0|n1\n", "4247"),
            (SlurmJobState{
                .job_id = "4247", .state = "FAILED", .nodes = "n1", .exit_code = 3, .signal = 0}));
  EXPECT_EQ(parseSacct("4246|CANCELLED|0:0|(null)\n", "4246"),
            (SlurmJobState{.job_id = "4246", .state = "CANCELLED", .exit_code = 0, .signal = 0}));
  EXPECT_EQ(
      parseSacct("12.batch|CANCELLED|0:15|n1\n12|CANCELLED by 0|0:15|n[1-2]\n", "12"),
      (SlurmJobState{
          .job_id = "12", .state = "CANCELLED", .nodes = "n[1-2]", .exit_code = 0, .signal = 15}));
  EXPECT_EQ(parseSacct("Slurm accounting storage is disabled\n", "12"), std::nullopt);
}

TEST(SlurmState, SbatchParsableAnswers) {
  EXPECT_EQ(parseSbatchJobId("4242\n"), "4242");
  EXPECT_EQ(parseSbatchJobId("4242;cluster-a\n"), "4242");
  for (const std::string text : {"", "\n", "sbatch: error: Batch job submission failed", "42x"}) {
    try {
      parseSbatchJobId(text);
      ADD_FAILURE() << "accepted: " << text;
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kFormat);
    }
  }
}

TEST(SlurmState, EveryStateMapsToARunStatus) {
  struct Case {
    std::string state, status;
    bool final;
  };
  for (const Case& c : std::vector<Case>{{"PENDING", "pending", false},
                                         {"CONFIGURING", "pending", false},
                                         {"REQUEUED", "pending", false},
                                         {"SUSPENDED", "pending", false},
                                         {"RUNNING", "running", false},
                                         {"COMPLETING", "running", false},
                                         {"COMPLETED", "completed", true},
                                         {"CANCELLED", "cancelled", true},
                                         {"CANCELLED by 0", "cancelled", true},
                                         {"PREEMPTED", "cancelled", true},
                                         {"FAILED", "failed", true},
                                         {"TIMEOUT", "failed", true},
                                         {"NODE_FAIL", "failed", true},
                                         {"OUT_OF_MEMORY", "failed", true},
                                         {"BOOT_FAIL", "failed", true},
                                         {"DEADLINE", "failed", true},
                                         {"A_STATE_OF_SLURM_99", "failed", true}}) {
    EXPECT_EQ(runStatusOfSlurmState(c.state), c.status) << c.state;
    EXPECT_EQ(isFinalSlurmState(c.state), c.final) << c.state;
  }
  const std::string timeout =
      describeSlurmState({.job_id = "9", .state = "TIMEOUT", .nodes = "n[1-2]"});
  EXPECT_NE(timeout.find("time limit"), std::string::npos) << timeout;
  EXPECT_NE(timeout.find("TIMEOUT"), std::string::npos) << timeout;
  EXPECT_NE(timeout.find("n[1-2]"), std::string::npos) << timeout;
}

}  // namespace
}  // namespace ringmaster::slurm
