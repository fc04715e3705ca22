// `ringmaster export RUN`: storage/export's CSV files and trace, their paths printed.
#include "cli/export_command.h"

#include <fmt/format.h>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "core/error.h"
#include "exit_codes.h"
#include "export/run_export.h"

namespace ringmaster::cli {

namespace {

struct ExportOptions {
  int64_t run_id = 0;
  std::string csv_dir;
  std::string trace_path;
  bool json = false;
};

int exportCommand(const storage::Database& db, const ExportOptions& options) {
  nlohmann::json written = nlohmann::json::object();
  if (!options.csv_dir.empty()) {
    const std::vector<std::string> files =
        storage::exportRunCsv(db, options.run_id, options.csv_dir);
    written["files"] = files;
    if (!options.json)
      for (const std::string& file : files) fmt::print("{}\n", file);
  }
  if (!options.trace_path.empty()) {
    const int64_t slices = storage::exportRunTrace(db, options.run_id, options.trace_path);
    written["file"] = options.trace_path;
    written["slices"] = slices;
    if (!options.json)
      fmt::print("{}: {} slices; open it in https://ui.perfetto.dev\n", options.trace_path, slices);
  }
  if (options.json) fmt::print("{}\n", written.dump(2));
  return kExitOk;
}

}  // namespace

void addExportCommand(CLI::App& app, Commands& commands) {
  auto options = std::make_shared<ExportOptions>();
  CLI::App* exporter = app.add_subcommand(
      "export", "write a run as CSV files, a Perfetto trace or both (at least one of the two)");
  exporter->add_option("run", options->run_id, "run id")->required();
  exporter->add_option("--csv", options->csv_dir,
                       "directory for run.json and one CSV file per table");
  exporter->add_option("--trace", options->trace_path,
                       "Chrome trace JSON file (open in https://ui.perfetto.dev)");
  exporter->add_flag("--json", options->json, "print what was written as JSON");
  commands.add(exporter, [options](const CommonOptions& common) {
    if (options->csv_dir.empty() && options->trace_path.empty()) {
      RM_THROW(kInvalidArgument, "export needs --csv DIR, --trace FILE or both: nothing to write");
    }
    return exportCommand(*openDatabaseForReading(common.databasePath()), *options);
  });
}

}  // namespace ringmaster::cli
