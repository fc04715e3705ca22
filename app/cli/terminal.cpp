// Tables and human-readable formats for the command line.
#include "cli/terminal.h"

#include <unistd.h>

#include <cmath>
#include <cstdlib>
#include <ctime>

#include <fmt/format.h>

#include "core/display_text.h"
#include "core/number_format.h"

namespace ringmaster::cli {

namespace {

// Visible width: escape sequences count nothing, UTF-8 continuation bytes count nothing.
size_t visibleWidth(const std::string& text) {
  size_t width = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    if (text[i] == '\x1b') {
      while (i < text.size() && text[i] != 'm') ++i;
      continue;
    }
    if ((static_cast<unsigned char>(text[i]) & 0xC0) != 0x80) ++width;
  }
  return width;
}

}  // namespace

bool colourFor(std::FILE* stream) {
  if (std::getenv("NO_COLOR") != nullptr) return false;
  const char* term = std::getenv("TERM");
  if (term != nullptr && std::string(term) == "dumb") return false;
  return ::isatty(::fileno(stream)) != 0;
}

std::string paint(const std::string& untrusted, Colour colour, bool enabled) {
  const std::string text = displaySafeLine(untrusted);
  if (!enabled || colour == Colour::kNone) return text;
  const char* code = "";
  switch (colour) {
    case Colour::kGreen:
      code = "32";
      break;
    case Colour::kRed:
      code = "31";
      break;
    case Colour::kYellow:
      code = "33";
      break;
    case Colour::kCyan:
      code = "36";
      break;
    case Colour::kDim:
      code = "2";
      break;
    case Colour::kBold:
      code = "1";
      break;
    case Colour::kNone:
      break;
  }
  return fmt::format("\x1b[{}m{}\x1b[0m", code, text);
}

Colour statusColour(const std::string& status) {
  if (status == "completed") return Colour::kGreen;
  if (status == "failed") return Colour::kRed;
  if (status == "running") return Colour::kCyan;
  return Colour::kYellow;
}

Table::Table(std::vector<std::string> headers)
    : headers_(std::move(headers)), right_(headers_.size(), false) {}

void Table::addRow(std::vector<std::string> cells) {
  cells.resize(headers_.size());
  rows_.push_back(std::move(cells));
}

void Table::alignRight(std::vector<size_t> columns) {
  for (size_t column : columns)
    if (column < right_.size()) right_[column] = true;
}

void Table::print(std::FILE* out) const {
  std::vector<size_t> widths(headers_.size());
  for (size_t c = 0; c < headers_.size(); ++c) widths[c] = visibleWidth(headers_[c]);
  for (const auto& row : rows_)
    for (size_t c = 0; c < row.size(); ++c) widths[c] = std::max(widths[c], visibleWidth(row[c]));
  auto printRow = [&](const std::vector<std::string>& row) {
    std::string line;
    for (size_t c = 0; c < row.size(); ++c) {
      const std::string padding(widths[c] - visibleWidth(row[c]), ' ');
      if (c > 0) line += "  ";
      line += right_[c] ? padding + row[c] : (c + 1 == row.size() ? row[c] : row[c] + padding);
    }
    line.erase(line.find_last_not_of(' ') + 1);
    fmt::print(out, "{}\n", line);
  };
  printRow(headers_);
  for (const auto& row : rows_) printRow(row);
}

std::string formatBytes(double bytes) {
  return ringmaster::formatBytes(bytes, kTerminalBytes);
}

std::string formatDuration(double seconds) {
  if (!(seconds >= 0) || !std::isfinite(seconds)) return "-";
  if (seconds < 60) return fmt::format("{:.1f} s", seconds);
  if (seconds >= 1e9) return fmt::format("{:.3g} h", seconds / 3600);  // beyond 31 years
  const auto total = static_cast<int64_t>(std::llround(seconds));
  if (total < 3600) return fmt::format("{}:{:02}", total / 60, total % 60);
  return fmt::format("{}:{:02}:{:02}", total / 3600, total / 60 % 60, total % 60);
}

std::string formatTimestamp(double epoch_seconds) {
  // Years 1970 to 9999: anything else is no time a run was started at.
  if (!(epoch_seconds >= 0 && epoch_seconds < 253402300800.0)) return "-";
  const auto time = static_cast<std::time_t>(epoch_seconds);
  std::tm local{};
  ::localtime_r(&time, &local);
  char text[32];
  std::strftime(text, sizeof text, "%Y-%m-%d %H:%M", &local);
  return text;
}

std::string formatNumber(double value, int significant) {
  if (!std::isfinite(value)) return fmt::format("{}", value);
  // Whole numbers in full up to 15 digits; beyond, in exponent form (1e308 has 309 digits).
  if (value != 0 && std::abs(value) >= std::pow(10.0, significant) && std::abs(value) < 1e15)
    return fmt::format("{:.0f}", value);
  return fmt::format("{:.{}g}", value, significant);
}

std::string formatOptional(const std::optional<double>& value, int significant) {
  return value ? formatNumber(*value, significant) : "-";
}

}  // namespace ringmaster::cli
