// The field tables of the step, comm and sched records (telemetry/fields.h): every numeric field is
// enforced at its domain's bounds by both decoders alike, and the domains are those that
// docs/telemetry.md ("Numeric domains") documents.
#include "telemetry/fields.h"

#include <gtest/gtest.h>

#include <fstream>
#include <limits>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/test_paths.h"
#include "sample_events.h"
#include "telemetry/codec.h"
#include "telemetry/fast_decoder.h"

namespace ringmaster {
namespace {

using Json = nlohmann::json;

// The domain of a field as docs/telemetry.md writes it; empty for fields without one.
template <typename Field>
std::string documentedDomain(const Field& field) {
  if constexpr (std::is_same_v<decltype(field.domain), IntegerDomain>) {
    auto bound = [](int64_t value) -> std::string {
      if (value == 0) return "0";
      if (value == kMaxStep) return "2⁵³";
      if (value == -kMaxStep) return "−2⁵³";
      if (value == std::numeric_limits<int>::max()) return "2³¹−1";
      if (value == std::numeric_limits<int64_t>::max()) return "2⁶³−1";
      return std::to_string(value);
    };
    return "integer in [" + bound(field.domain.min) + ", " + bound(field.domain.max) + "]";
  } else if constexpr (std::is_same_v<decltype(field.domain), NumberDomain>) {
    auto bound = [](double value) -> std::string {
      if (value == kMaxMagnitude) return "10³⁰⁰";
      if (value == -kMaxMagnitude) return "−10³⁰⁰";
      return std::to_string(static_cast<int>(value));
    };
    return "number in [" + bound(field.domain.min) + ", " + bound(field.domain.max) + "]";
  } else {
    return "";
  }
}

// The rows of the "Numeric domains" table: fields cell, domain cell.
std::vector<std::pair<std::string, std::string>> documentedRows() {
  std::ifstream file(std::string(ringmaster::testSourceDir()) + "/docs/telemetry.md");
  std::vector<std::pair<std::string, std::string>> rows;
  std::string line;
  bool inside = false;
  while (std::getline(file, line)) {
    if (line.starts_with("## ")) inside = line == "## Numeric domains";
    if (!inside || !line.starts_with("| `")) continue;
    const std::size_t middle = line.find(" | ", 2);
    if (middle == std::string::npos) continue;
    rows.emplace_back(line.substr(2, middle - 2), line.substr(middle + 3));
  }
  return rows;
}

// Whether a fields cell names `record.name`, the bare `name`, or a `record.prefix*` covering it.
bool names(const std::string& cell, std::string_view record, std::string_view name) {
  const std::string full = "`" + std::string(record) + "." + std::string(name) + "`";
  if (cell.find(full) != std::string::npos) return true;
  if (cell.find("`" + std::string(name) + "`") != std::string::npos) return true;
  for (std::size_t star = cell.find("*`"); star != std::string::npos;
       star = cell.find("*`", star + 1)) {
    const std::size_t open = cell.rfind('`', star);
    const std::string pattern = cell.substr(open + 1, star - open - 1);  // "step.mem_"
    if ((std::string(record) + "." + std::string(name)).starts_with(pattern)) return true;
  }
  return false;
}

template <typename Record>
void expectDocumented(std::string_view record, const Record&) {
  const auto rows = documentedRows();
  ASSERT_FALSE(rows.empty()) << "no Numeric domains table in docs/telemetry.md";
  forEachField(fieldsOf<Record>(), [&](const auto& field) {
    const std::string domain = documentedDomain(field);
    if (domain.empty()) return;
    bool found = false;
    for (const auto& [fields, text] : rows) {
      if (!names(fields, record, field.name)) continue;
      found = true;
      EXPECT_TRUE(text.starts_with(domain)) << record << "." << field.name << ": documented as "
                                            << text << ", the table has " << domain;
    }
    EXPECT_TRUE(found) << record << "." << field.name << " is not in the Numeric domains table";
  });
}

TEST(TelemetryFields, DomainsAreTheDocumentedOnes) {
  expectDocumented("step", StepEvent{});
  expectDocumented("comm", CommEvent{});
  expectDocumented("sched", SchedEvent{});
  expectDocumented("eval", EvalEvent{});
  expectDocumented("progress", ProgressEvent{});
}

// The line of `body` with one field set to `value`.
std::string withField(const EventBody& body, std::string_view name, const Json& value) {
  Json line = Json::parse(encodeEvent(samples::wrap(body)));
  line[std::string(name)] = value;
  return line.dump();
}

// Both decoders agree on `line`: the fast path gives the full decoder's event or declines.
void expectAgreement(const std::string& line) {
  const DecodeResult full = decodeEventFully(line);
  const std::optional<TelemetryEvent> fast = decodeCommonEvent(line);
  if (!full.ok()) {
    EXPECT_FALSE(fast.has_value()) << "the fast path accepted " << line;
  } else if (fast) {
    EXPECT_EQ(*fast, full.event()) << line;
  }
}

// Values just outside the field's domain are rejected by both decoders, with a message naming the
// field; the bounds themselves decode alike in both.
template <typename Record>
void expectBoundsEnforced(std::string_view record, const Record& sample) {
  forEachField(fieldsOf<Record>(), [&](const auto& field) {
    std::vector<Json> inside, outside;
    if constexpr (std::is_same_v<decltype(field.domain), IntegerDomain>) {
      inside = {field.domain.min, field.domain.max};
      // Just above the largest (2^63 for the unsigned fields storage keeps in an int64).
      outside = {field.domain.min - 1, static_cast<uint64_t>(field.domain.max) + 1, 0.5};
    } else if constexpr (std::is_same_v<decltype(field.domain), NumberDomain>) {
      inside = {field.domain.min, field.domain.max};
      outside = {field.domain.min - (field.domain.min == 0 ? 0.5 : field.domain.max),
                 field.domain.max * 10, "1"};
    } else if constexpr (std::is_same_v<decltype(field.domain), OneOf>) {
      // Every spelling, and near misses of them (issue 34: comm.dim).
      for (std::size_t i = 0; i < field.domain.count; ++i) {
        const std::string name(field.domain.names[i]);
        inside.push_back(name);
        outside.insert(outside.end(), {name + " ", "x" + name, name.substr(1)});
      }
      outside.insert(outside.end(), {"", 1, Json::array()});
    } else {
      return;
    }
    for (const Json& value : inside) expectAgreement(withField(sample, field.name, value));
    for (const Json& value : outside) {
      const std::string line = withField(sample, field.name, value);
      const DecodeResult full = decodeEventFully(line);
      ASSERT_FALSE(full.ok()) << "accepted " << line;
      EXPECT_TRUE(full.error().message.starts_with(std::string(record) + "." +
                                                   std::string(field.name) + ": "))
          << full.error().message;
      EXPECT_FALSE(decodeCommonEvent(line).has_value()) << "the fast path accepted " << line;
    }
  });
}

TEST(TelemetryFields, BothDecodersEnforceEveryDomainAtItsBounds) {
  expectBoundsEnforced("step", samples::fullStep());
  expectBoundsEnforced("comm", samples::fullComm());
  expectBoundsEnforced("sched", samples::fullSched());
  expectBoundsEnforced("eval", samples::sampleEval());
  expectBoundsEnforced("progress", samples::fullProgress());
}

TEST(TelemetryFields, EveryFieldIsWrittenInTableOrder) {
  auto expectOrder = [](const auto& body) {
    std::vector<std::string> expected = {"v", "type", "rank", "seq", "t"};
    forEachField(fieldsOf<std::decay_t<decltype(body)>>(),
                 [&](const auto& field) { expected.emplace_back(field.name); });
    const nlohmann::ordered_json ordered =
        nlohmann::ordered_json::parse(encodeEvent(samples::wrap(body)));
    std::vector<std::string> keys;
    for (const auto& [key, value] : ordered.items()) keys.push_back(key);
    EXPECT_EQ(keys, expected);
  };
  expectOrder(samples::fullStep());
  expectOrder(samples::fullComm());
  expectOrder(samples::fullSched());
  expectOrder(samples::sampleEval());
  expectOrder(samples::fullProgress());
}

}  // namespace
}  // namespace ringmaster
