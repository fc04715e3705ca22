// sinfo's version line and its partition lines (sinfo.h), and the three fixed commands that ask
// for them.
#include "slurm/sinfo.h"

#include <algorithm>
#include <cctype>
#include <charconv>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster::slurm {
namespace {

std::vector<std::string_view> split(std::string_view text, char separator) {
  std::vector<std::string_view> parts;
  for (size_t begin = 0;;) {
    const size_t end = text.find(separator, begin);
    parts.push_back(text.substr(begin, end - begin));
    if (end == std::string_view::npos) return parts;
    begin = end + 1;
  }
}

std::optional<int> count(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size() || value < 0) return std::nullopt;
  return value;
}

// One line "NAME|AVAIL|A/I/O/T" as a partition; nullopt when it is not that.
std::optional<SlurmPartition> parsePartitionLine(std::string_view line) {
  const std::vector<std::string_view> fields = split(line, '|');
  if (fields.size() != 3 || fields[0].empty()) return std::nullopt;
  const std::vector<std::string_view> nodes = split(fields[2], '/');
  if (nodes.size() != 4) return std::nullopt;
  SlurmPartition partition;
  partition.name = fields[0];
  if (partition.name.back() == '*') {
    partition.is_default = true;
    partition.name.pop_back();
  }
  partition.availability = fields[1];
  int* counts[] = {&partition.allocated, &partition.idle, &partition.other, &partition.total};
  for (size_t i = 0; i < 4; ++i) {
    const std::optional<int> value = count(nodes[i]);
    if (!value) return std::nullopt;
    *counts[i] = *value;
  }
  return partition;
}

// The last line of `text` that says something (sinfo's "fatal: ..." comes after its "error"s).
std::string lastLine(std::string_view text) {
  std::string_view last;
  for (std::string_view line : split(text, '\n')) {
    while (!line.empty() && (line.back() == '\r' || line.back() == ' ')) line.remove_suffix(1);
    if (!line.empty()) last = line;
  }
  return std::string(last.substr(0, 500));
}

}  // namespace

std::vector<std::string> sinfoPartitionsCommand() {
  return {"sinfo", "--noheader", "--format=%P|%a|%F"};
}

std::string parseSinfoVersion(std::string_view text) {
  const std::string_view line = text.substr(0, text.find('\n'));
  const size_t space = line.rfind(' ');
  if (space == std::string_view::npos || line.substr(0, 5) != "slurm") return "";
  const std::string_view version = line.substr(space + 1);
  const bool plausible = !version.empty() && std::isdigit(static_cast<unsigned char>(version[0]));
  return plausible ? std::string(version) : "";
}

std::vector<SlurmPartition> parseSinfoPartitions(std::string_view text) {
  std::vector<SlurmPartition> partitions;
  int line_number = 0;
  for (std::string_view line : split(text, '\n')) {
    ++line_number;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.empty()) continue;
    std::optional<SlurmPartition> partition = parsePartitionLine(line);
    if (!partition) {
      RM_THROW(kFormat, fmt::format("sinfo's line {} is not NAME|AVAIL|A/I/O/T: '{}'", line_number,
                                    line.substr(0, 200)));
    }
    auto same = std::find_if(partitions.begin(), partitions.end(),
                             [&](const SlurmPartition& p) { return p.name == partition->name; });
    if (same == partitions.end()) {
      partitions.push_back(std::move(*partition));
      continue;
    }
    same->allocated += partition->allocated;
    same->idle += partition->idle;
    same->other += partition->other;
    same->total += partition->total;
  }
  return partitions;
}

std::optional<SlurmClusterInfo> querySlurmCluster(const CommandRunner& run) {
  if (!run({"sh", "-c", "command -v sinfo"}).status.ok()) return std::nullopt;
  SlurmClusterInfo info;
  const CommandOutput version = run({"sinfo", "--version"});
  info.version = parseSinfoVersion(version.out);
  const CommandOutput partitions = run(sinfoPartitionsCommand());
  for (const CommandOutput* output : {&version, &partitions}) {
    if (!output->status.ok() && info.error.empty()) {
      const std::string said = lastLine(output->err);
      info.error = fmt::format("sinfo failed ({}): {}", output->status.describe(),
                               said.empty() ? "no message" : said);
    }
  }
  if (!partitions.status.ok()) return info;
  try {
    info.partitions = parseSinfoPartitions(partitions.out);
  } catch (const Error& e) {
    info.error = e.message();
  }
  return info;
}

}  // namespace ringmaster::slurm
