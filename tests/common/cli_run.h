// The set-up of the tests that run this build's `ringmaster` on a spec and read what it recorded:
// the command and the example specs, a command run to its end (its status and output), a fixture
// whose temporary directory (StorageTest's) holds the spec files and the run database, and the DDP
// example on local ranks that most of them run.
#pragma once

#include <chrono>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/captured_process.h"
#include "common/test_paths.h"
#include "storage/storage_test_support.h"

namespace ringmaster::testing {

// This build's `ringmaster`.
inline std::string ringmasterBinary() {
  return std::string(testBinaryDir()) + "/app/ringmaster";
}

// resources/examples/NAME.json, and its document.
inline std::string examplePath(const std::string& name) {
  return std::string(testSourceDir()) + "/resources/examples/" + name + ".json";
}
inline nlohmann::json exampleSpec(const std::string& name) {
  std::ifstream in(examplePath(name));
  return nlohmann::json::parse(in);
}

// The DDP example (an MLP on synthetic data) on `ranks` local ranks.
inline nlohmann::json localDdpSpec(int ranks) {
  nlohmann::json spec = exampleSpec("ddp_mlp");
  spec["launch"]["hosts"] = nlohmann::json::array({{{"host", "localhost"}, {"ranks", ranks}}});
  return spec;
}

// Every byte of a file ("" when it cannot be read).
inline std::string fileBytes(const std::filesystem::path& path) {
  std::ifstream in(path, std::ios::binary);
  return {std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>()};
}

// What a command run to its end gave: how it ended and everything it printed.
struct CliResult {
  ExitStatus status;
  std::string out, err;
};

// Waits for `process` (at most `limit`, then it is killed); its status and output.
inline CliResult runToEnd(CapturedProcess process, std::chrono::seconds limit) {
  const ExitStatus status = process.wait(limit);
  return {status, process.out(), process.err()};
}

// A test of `ringmaster` runs recorded in dbPath(), inside the test's own directory.
class CliRunTest : public storage::testing::StorageTest {
 protected:
  std::string dbPath() const { return (dir_ / "runs.db").string(); }

  // Writes `spec` as NAME.json in the test's directory; its path.
  std::string writeSpec(const std::string& name, const nlohmann::json& spec) const {
    std::filesystem::create_directories(dir_);
    const std::string path = (dir_ / (name + ".json")).string();
    std::ofstream(path) << spec.dump(2);
    return path;
  }

  // `ringmaster --db DB ARGS...`, started.
  CapturedProcess ringmaster(std::vector<std::string> args,
                             const std::map<std::string, std::string>& env = {}) const {
    args.insert(args.begin(), {"--db", dbPath()});
    return CapturedProcess(ringmasterBinary(), args, env);
  }

  // `ringmaster --db DB ARGS...` run to its end (killed after `limit`).
  CliResult runRingmaster(std::vector<std::string> args,
                          std::chrono::seconds limit = std::chrono::seconds(120),
                          const std::map<std::string, std::string>& env = {}) const {
    return runToEnd(ringmaster(std::move(args), env), limit);
  }
};

}  // namespace ringmaster::testing
