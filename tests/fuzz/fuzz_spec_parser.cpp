// libFuzzer target for the job-spec parser: any bytes must give either a spec or a list of
// problems, never a crash or an exception; a spec that parses must survive the canonical round
// trip (parseJobSpec(toJson(spec)) == spec).
#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <string_view>

#include "spec/job_spec.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view text(reinterpret_cast<const char*>(data), size);
  ringmaster::SpecParseResult parsed = ringmaster::parseJobSpec(text);
  if (parsed.ok() != parsed.problems.empty()) std::abort();
  if (parsed.ok()) {
    ringmaster::SpecParseResult again = ringmaster::parseJobSpec(ringmaster::toJson(*parsed.spec));
    if (!again.ok() || !(*again.spec == *parsed.spec)) std::abort();
  } else {
    (void)parsed.describe();
  }
  return 0;
}
