// POSIX shell quoting (shell_quote.h): single quotes around the text, a quote inside closed,
// escaped and reopened.
#include "process/shell_quote.h"

#include "core/error.h"

namespace ringmaster {

std::string shellQuote(const std::string& text) {
  RM_CHECK_ARG(text.find('\0') == std::string::npos, "a shell argument may not contain a NUL byte");
  std::string out = "'";
  for (char c : text) {
    if (c == '\'')
      out += "'\\''";
    else
      out += c;
  }
  return out + "'";
}

std::string shellCommand(const std::vector<std::string>& words) {
  std::string out;
  for (const auto& word : words) {
    if (!out.empty()) out += ' ';
    out += shellQuote(word);
  }
  return out;
}

}  // namespace ringmaster
