// The command line around the subcommands (issue 33): the options every subcommand shares are
// taken anywhere on the line (`ringmaster show 3 --db X`, `ringmaster --json show 3`), and a
// misspelled subcommand is answered with the nearest one ("did you mean 'show'?"). It reads the
// subcommands and options CLI11 was given; it adds none.
#pragma once

#include <optional>
#include <string>
#include <vector>

namespace CLI {
class App;
}

namespace ringmaster::cli {

// Lets each subcommand of `app` take the options of `app` after its own (CLI11's fallthrough);
// call before the subcommands are added, which inherit it.
void takeGlobalOptionsAnywhere(CLI::App& app);

// The arguments (argv[1..], the program's name left out) with each `--json` given before the
// subcommand moved just after its name, where the subcommand's own flag reads it; unchanged when
// the subcommand has no --json.
std::vector<std::string> withGlobalFlagsAfterSubcommand(const CLI::App& app,
                                                        std::vector<std::string> args);

// Where the first word that is neither an option of `app` nor an option's value names no
// subcommand: "unknown subcommand 'shw' (did you mean 'show'?)"; nullopt when it names one or
// there is no such word.
std::optional<std::string> unknownSubcommandMessage(const CLI::App& app,
                                                    const std::vector<std::string>& args);

}  // namespace ringmaster::cli
