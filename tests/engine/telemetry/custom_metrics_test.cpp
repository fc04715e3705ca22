// The bounds on custom metric names (issue 33), one class of name at a time, and adding a custom
// metric to a step event: a non-finite or oversized value goes as null, a refused name throws.
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <limits>
#include <string>

#include "core/error.h"
#include "telemetry/custom_metrics.h"
#include "telemetry/fields.h"

namespace ringmaster {
namespace {

TEST(CustomMetricNames, EveryAllowedCharacterUpToTheLongestNameIsAccepted) {
  const std::string every = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789_./-";
  EXPECT_EQ(customMetricNameProblem(every), std::nullopt);
  for (const char* name :
       {"train/grad_norm", "eval/acc", "my_custom_thing", "a", "x/", "7", "-", ".hidden", "a//b"}) {
    EXPECT_EQ(customMetricNameProblem(name), std::nullopt) << name;
  }
  EXPECT_EQ(customMetricNameProblem(std::string(kMaxCustomMetricNameBytes, 'a')), std::nullopt);
}

TEST(CustomMetricNames, EachKindOfBadNameIsNamed) {
  EXPECT_EQ(customMetricNameProblem(""), MetricNameProblem::kEmpty);
  EXPECT_EQ(customMetricNameProblem(std::string(kMaxCustomMetricNameBytes + 1, 'a')),
            MetricNameProblem::kTooLong);
  EXPECT_EQ(customMetricNameProblem(std::string(1 << 20, 'a')), MetricNameProblem::kTooLong);
  EXPECT_EQ(customMetricNameProblem("/train/loss"), MetricNameProblem::kLeadingSlash);
  // Every byte outside the set, at the start, the middle and the end of a name.
  for (int byte = 0; byte < 256; ++byte) {
    const char c = static_cast<char>(byte);
    const bool allowed = std::isalnum(byte) != 0 && byte < 128;
    if (allowed || c == '_' || c == '.' || c == '/' || c == '-') continue;
    for (const std::string& name :
         {std::string(1, c) + "ab", "a" + std::string(1, c) + "b", "ab" + std::string(1, c)}) {
      EXPECT_EQ(customMetricNameProblem(name), MetricNameProblem::kCharacter) << "byte " << byte;
    }
  }
  forEachField(kStepFields, [](const auto& field) {
    EXPECT_EQ(customMetricNameProblem(field.name), MetricNameProblem::kStepField) << field.name;
  });
  EXPECT_EQ(describe(MetricNameProblem::kTooLong), "the name is longer than 128 bytes");
}

TEST(CustomMetricNames, AddingOneKeepsAFiniteValueAndSendsTheRestAsNull) {
  StepEvent step;
  addCustomMetric(step, "eval/acc", 0.75);
  addCustomMetric(step, "edge", -kMaxMagnitude);
  for (const double odd : {std::numeric_limits<double>::quiet_NaN(),
                           std::numeric_limits<double>::infinity(), -1e301, 1e308}) {
    addCustomMetric(step, "odd", odd);
    EXPECT_TRUE(std::isnan(step.metrics.at("odd"))) << odd;
  }
  EXPECT_EQ(step.metrics.at("eval/acc"), 0.75);
  EXPECT_EQ(step.metrics.at("edge"), -kMaxMagnitude);
  for (const char* refused : {"", "loss", "has space", "/lead"}) {
    try {
      addCustomMetric(step, refused, 1.0);
      ADD_FAILURE() << "'" << refused << "' was added";
    } catch (const Error& e) {
      EXPECT_EQ(e.kind(), ErrorKind::kInvalidArgument) << refused;
    }
  }
  EXPECT_EQ(step.metrics.size(), 3u);
}

}  // namespace
}  // namespace ringmaster
