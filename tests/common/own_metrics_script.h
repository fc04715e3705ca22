// A real program job whose script logs metrics of its own (issue 33, any metric): a plain Python
// script (no torch needed) that calls `ringmaster.log(step, **metrics)` with the names
// train/grad_norm, eval/acc and my_custom_thing on every rank, and the spec that runs it. Tests of
// the front ends record it with `ringmaster run` so that the rows they read are the recorder's own.
#pragma once

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

namespace ringmaster::testing {

inline const std::vector<std::string> kOwnMetricNames = {"train/grad_norm", "eval/acc",
                                                         "my_custom_thing"};

// Writes the script and its spec (NAME.py, NAME.json in `dir`): `ranks` local ranks, `steps`
// steps each logging the loss and the three own metrics. Returns the spec's path.
inline std::string writeOwnMetricsJob(const std::filesystem::path& dir, const std::string& name,
                                      int ranks, int steps) {
  const std::filesystem::path script = dir / (name + ".py");
  std::ofstream(script)
      << "import os, ringmaster\n"
         "ringmaster.init()\n"
         "rank = int(os.environ.get('RANK', '0'))\n"
         "for step in range(1, "
      << steps + 1
      << "):\n"
         "    ringmaster.log(step, loss=1.0 / step, lr=0.01, samples=8, **{\n"
         "        'train/grad_norm': 0.5 / step + rank, 'eval/acc': 0.25 * step,\n"
         "        'my_custom_thing': float(step * 10 + rank)})\n";
  const nlohmann::json spec = {
      {"name", name},
      {"program",
       {{"python", "/usr/bin/python3"},
        {"script", script.string()},
        {"args", nlohmann::json::array()}}},
      {"launch", {{"hosts", {{{"host", "localhost"}, {"ranks", ranks}}}}, {"timeout_s", 120}}}};
  const std::filesystem::path spec_path = dir / (name + ".json");
  std::ofstream(spec_path) << spec.dump();
  return spec_path.string();
}

}  // namespace ringmaster::testing
