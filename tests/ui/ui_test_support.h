// What the GUI tests share: a scratch directory per test case, the built `ringmaster` executable,
// example specs shortened for tests, and the database of a real run.
#pragma once

#include <QDir>
#include <QString>
#include <QTemporaryDir>
#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>
#include <string>
#include "common/test_paths.h"

namespace ringmaster::ui::testing {

inline QString ringmasterExecutable() {
  return QString::fromUtf8(ringmaster::testBinaryDir()) + "/app/ringmaster";
}

// resources/examples/NAME.json with these steps, telemetry every step.
inline nlohmann::json exampleSpec(const std::string& name, int64_t steps) {
  std::ifstream in(std::string(ringmaster::testSourceDir()) + "/resources/examples/" + name +
                   ".json");
  std::stringstream text;
  text << in.rdbuf();
  nlohmann::json spec = nlohmann::json::parse(text.str());
  spec["train"]["steps"] = steps;
  spec["telemetry"]["every_steps"] = 1;
  spec.erase("checkpoint");
  return spec;
}

}  // namespace ringmaster::ui::testing
