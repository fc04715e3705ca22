// `ringmaster serve`: the web dashboard (ui/web/, docs/web.md) over the run database until Ctrl-C.
// Prints the URL once (with the generated token for an address that is not loopback); never
// touches Qt, so it runs where there is no display.
#pragma once

#include <string>

#include "cli/command.h"

namespace ringmaster::cli {

struct ServeCommandOptions {
  std::string db_path;
  std::string listen = "127.0.0.1:8765";
  std::string token_file;  // "": generate one where the address needs it
  std::string assets_dir;  // "": <directory of the ringmaster binary>/web
  bool read_only = false;  // refuse the API's writes (tags, note, name, delete)
  // The server's nice value, 0..19: by default below a `ringmaster run` recording on the same
  // machine, so that pages being served never slow the recorder (it is only ever raised: a
  // server started at a higher nice value keeps it).
  int nice = 10;
};

// Serves until SIGINT or SIGTERM; returns the exit code (0 after a clean stop).
int serveCommand(const ServeCommandOptions& options);

// `serve`.
void addServeCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
