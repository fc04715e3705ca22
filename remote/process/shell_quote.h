// POSIX shell quoting: a text as one shell word that the shell turns back into exactly that text.
// Pure functions, without libssh, for every command line or script Ringmaster writes (the SSH
// launcher's remote commands, the Slurm batch script); nothing here runs a shell.
#pragma once

#include <string>
#include <vector>

namespace ringmaster {

// One POSIX shell word that the shell turns back into exactly `text` (single quotes; a quote
// inside becomes '\''). Refuses text with a NUL byte (kInvalidArgument).
std::string shellQuote(const std::string& text);
// Words quoted and joined by spaces.
std::string shellCommand(const std::vector<std::string>& words);

}  // namespace ringmaster
