// The spool's segments are plain files of "T LINE" / "L LINE" lines, each written whole with
// write(2); the writer closes a segment before it makes the next, so a reader that sees a later
// segment knows the earlier one is complete.
#include "agent/telemetry_spool.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace fs = std::filesystem;

namespace {

constexpr std::string_view kSegmentPrefix = "segment-";

bool writeWhole(int fd, std::string_view data) {
  while (!data.empty()) {
    const ssize_t n = ::write(fd, data.data(), data.size());
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    data.remove_prefix(static_cast<size_t>(n));
  }
  return true;
}

// The indices of the segments in `directory`, ascending.
std::vector<int64_t> segmentIndices(const std::string& directory) {
  std::vector<int64_t> indices;
  std::error_code error;
  for (const auto& entry : fs::directory_iterator(directory, error)) {
    const std::string name = entry.path().filename().string();
    if (!name.starts_with(kSegmentPrefix)) continue;
    try {
      indices.push_back(std::stoll(name.substr(kSegmentPrefix.size())));
    } catch (const std::exception&) {
    }
  }
  std::sort(indices.begin(), indices.end());
  return indices;
}

// Replaces `path` with `text` (a temporary file renamed over it).
void writeSmallFile(const std::string& path, const std::string& text) {
  const std::string temporary = path + ".tmp";
  const int fd = ::open(temporary.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
  if (fd < 0) return;
  const bool written = writeWhole(fd, text);
  ::close(fd);
  if (written) ::rename(temporary.c_str(), path.c_str());
}

}  // namespace

std::string spoolSegmentPath(const std::string& directory, int64_t index) {
  return fmt::format("{}/{}{:08}", directory, kSegmentPrefix, index);
}

std::map<int, SpoolDrop> readSpoolDrops(const std::string& directory) {
  std::map<int, SpoolDrop> drops;
  std::ifstream file(directory + "/dropped");
  int rank = 0;
  SpoolDrop drop;
  while (file >> rank >> drop.lines >> drop.first_seq >> drop.last_seq) drops[rank] = drop;
  return drops;
}

std::optional<int> readSpoolEnd(const std::string& directory) {
  std::ifstream file(directory + "/end");
  int code = 0;
  if (file >> code) return code;
  return std::nullopt;
}

// ---------------------------------------------------------------------------------------------
// Writing

TelemetrySpool::TelemetrySpool(SpoolOptions options) : options_(std::move(options)) {
  RM_CHECK_ARG(options_.segment_bytes > 0 && options_.max_segments >= 1,
               "spool: a segment size and at least one segment");
  std::error_code error;
  fs::create_directories(options_.directory, error);
  if (error)
    RM_THROW(kIo, fmt::format("spool: cannot make {}: {}", options_.directory, error.message()));
  ::chmod(options_.directory.c_str(), 0700);
  const std::vector<int64_t> existing = segmentIndices(options_.directory);
  index_ = existing.empty() ? 0 : existing.back() + 1;
  openSegment();
  if (fd_ < 0)
    RM_THROW(kIo, fmt::format("spool: cannot create {}: {}",
                              spoolSegmentPath(options_.directory, index_), std::strerror(errno)));
}

TelemetrySpool::~TelemetrySpool() {
  if (fd_ >= 0) ::close(fd_);
}

void TelemetrySpool::openSegment() {
  fd_ = ::open(spoolSegmentPath(options_.directory, index_).c_str(),
               O_WRONLY | O_CREAT | O_EXCL | O_APPEND | O_CLOEXEC, 0600);
  bytes_ = 0;
  segments_.push_back({index_, {}});
}

std::string TelemetrySpool::rotate() {
  ::close(fd_);
  ++index_;
  openSegment();
  if (fd_ < 0) {
    failed_ = true;
    return fmt::format("warning: the telemetry spool cannot create {}: {}; the spool stops here",
                       spoolSegmentPath(options_.directory, index_), std::strerror(errno));
  }
  std::string report;
  while (static_cast<int>(segments_.size()) > options_.max_segments) {
    const auto [index, ranks] = segments_.front();
    segments_.erase(segments_.begin());
    ::unlink(spoolSegmentPath(options_.directory, index).c_str());
    int64_t lines = 0;
    std::string which;
    for (const auto& [rank, drop] : ranks) {
      SpoolDrop& total = dropped_[rank];
      if (total.lines == 0) total.first_seq = drop.first_seq;
      total.first_seq = std::min(total.first_seq, drop.first_seq);
      total.last_seq = std::max(total.last_seq, drop.last_seq);
      total.lines += drop.lines;
      lines += drop.lines;
      which += fmt::format("{}rank {} seq {}..{} ({} lines)", which.empty() ? "" : ", ", rank,
                           drop.first_seq, drop.last_seq, drop.lines);
    }
    std::string state;
    for (const auto& [rank, total] : dropped_)
      state += fmt::format("{} {} {} {}\n", rank, total.lines, total.first_seq, total.last_seq);
    writeSmallFile(options_.directory + "/dropped", state);
    report = fmt::format(
        "warning: the telemetry spool outgrew its bound ({} segments of {} bytes): segment {} "
        "deleted, {} telemetry lines dropped{}{}",
        options_.max_segments, options_.segment_bytes, index, lines, which.empty() ? "" : ": ",
        which);
  }
  return report;
}

std::string TelemetrySpool::append(char kind, std::string_view line, std::optional<int> rank,
                                   uint64_t seq) {
  if (failed_) return {};
  std::string record;
  record.reserve(line.size() + 3);
  record += kind;
  record += ' ';
  record += line;
  record += '\n';
  if (!writeWhole(fd_, record)) {
    failed_ = true;
    return fmt::format("warning: the telemetry spool cannot write {}: {}; the spool stops here",
                       spoolSegmentPath(options_.directory, index_), std::strerror(errno));
  }
  bytes_ += record.size();
  if (rank) {
    SpoolDrop& held = segments_.back().second[*rank];
    if (held.lines == 0) held.first_seq = seq;
    held.first_seq = std::min(held.first_seq, seq);
    held.last_seq = std::max(held.last_seq, seq);
    ++held.lines;
  }
  return bytes_ >= options_.segment_bytes ? rotate() : std::string();
}

std::string TelemetrySpool::appendTelemetry(std::string_view line, std::optional<int> rank,
                                            uint64_t seq) {
  return append('T', line, rank, seq);
}

std::string TelemetrySpool::appendLog(std::string_view line) {
  return append('L', line, std::nullopt, 0);
}

void TelemetrySpool::finish(int exit_code) {
  if (fd_ >= 0) ::fsync(fd_);
  writeSmallFile(options_.directory + "/end", fmt::format("{}\n", exit_code));
}

// ---------------------------------------------------------------------------------------------
// Reading

SpoolReader::SpoolReader(std::string directory, std::size_t max_record_bytes)
    : directory_(std::move(directory)), splitter_(max_record_bytes) {
  RM_CHECK_ARG(max_record_bytes > 2, "spool reader: a record limit above its 2-byte tag");
}

SpoolReader::~SpoolReader() {
  if (fd_ >= 0) ::close(fd_);
}

bool SpoolReader::openSegment(int64_t index) {
  if (fd_ >= 0) ::close(fd_);
  fd_ = ::open(spoolSegmentPath(directory_, index).c_str(), O_RDONLY | O_CLOEXEC);
  if (fd_ < 0) return false;
  if (index_ >= 0 && index > index_ + 1) {
    pending_.push_back({false, fmt::format("warning: the telemetry spool's segments {}..{} were "
                                           "deleted before they were read (the spool outgrew its "
                                           "bound); their lines are missing here",
                                           index_ + 1, index - 1)});
  }
  index_ = index;
  return true;
}

std::optional<int64_t> SpoolReader::oldestSegment() const {
  const std::vector<int64_t> indices = segmentIndices(directory_);
  for (int64_t index : indices)
    if (index > index_) return index;
  return std::nullopt;
}

SpoolLine SpoolReader::lineOf(LineSplitter::Line record) {
  const std::size_t line_limit = splitter_.maxLineBytes() - 2;
  const bool tagged = record.text.starts_with("T ") || record.text.starts_with("L ");
  if (record.oversized) {
    ++counts_.oversized;
    if (record.text.starts_with("L ")) {
      return {false, fmt::format("warning: the telemetry spool holds a log line of {} bytes, over "
                                 "the limit of {}, dropped",
                                 record.bytes - 2, line_limit)};
    }
    // A telemetry record, or bytes that are no record at all: a bad line either way.
    if (tagged) {
      record.text.erase(0, 2);
      record.bytes -= 2;
    }
    return {false, oversizedLineReport(std::nullopt, record, line_limit)};
  }
  if (tagged) return {record.text[0] == 'T', record.text.substr(2)};
  ++counts_.malformed;
  return {true, std::move(record.text)};
}

std::optional<SpoolLine> SpoolReader::next() {
  for (;;) {
    if (!pending_.empty()) {
      SpoolLine line = std::move(pending_.front());
      pending_.erase(pending_.begin());
      return line;
    }
    if (std::optional<LineSplitter::Line> record = splitter_.next()) return lineOf(*record);
    if (fd_ < 0) {
      const std::optional<int64_t> first = oldestSegment();
      if (!first || !openSegment(*first)) return std::nullopt;
      continue;
    }
    char chunk[1 << 16];
    const ssize_t n = ::read(fd_, chunk, sizeof chunk);
    if (n > 0) {
      splitter_.feed({chunk, static_cast<size_t>(n)});
      continue;
    }
    if (n < 0 && errno == EINTR) continue;
    // At the end of this segment: the next one, once the writer has made it (this one is then
    // complete; a last read takes what came between, and an unfinished last line is a line).
    const std::optional<int64_t> later = oldestSegment();
    if (!later) return std::nullopt;
    const ssize_t rest = ::read(fd_, chunk, sizeof chunk);
    if (rest > 0) {
      splitter_.feed({chunk, static_cast<size_t>(rest)});
      continue;
    }
    splitter_.finish();
    if (std::optional<LineSplitter::Line> tail = splitter_.next()) return lineOf(*tail);
    if (!openSegment(*later)) return std::nullopt;
  }
}

std::optional<int> SpoolReader::ended() {
  const std::optional<int> code = readSpoolEnd(directory_);
  if (!code) return std::nullopt;
  // Every line was written before `end`: one still unread is read first.
  if (std::optional<SpoolLine> line = next()) {
    pending_.insert(pending_.begin(), std::move(*line));
    return std::nullopt;
  }
  return code;
}

}  // namespace ringmaster
