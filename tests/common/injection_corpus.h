// The injection corpus: words that a shell, or a parser that splits on blanks and quotes, would
// take for more than one word or for a command. Tests feed each into whatever reaches a shell or
// a command line (shell quoting, host names, Slurm fields) and check it arrives as data.
#pragma once

#include <string>
#include <vector>

namespace ringmaster::testing {

inline const std::vector<std::string>& injectionCorpus() {
  static const std::vector<std::string> corpus = {"; touch CANARY",
                                                  "$(touch CANARY)",
                                                  "`touch CANARY`",
                                                  "| touch CANARY",
                                                  "& touch CANARY",
                                                  "< /etc/passwd",
                                                  "> CANARY",
                                                  "*",
                                                  "?",
                                                  "~",
                                                  "'",
                                                  "\"",
                                                  "it's \"quoted\"",
                                                  "a\nb",
                                                  "-rf",
                                                  "--help",
                                                  "with spaces",
                                                  "tab\there",
                                                  "Ünïcødé ✓",
                                                  "'; touch CANARY; '",
                                                  "\\",
                                                  "$HOME",
                                                  "${IFS}touch${IFS}CANARY"};
  return corpus;
}

}  // namespace ringmaster::testing
