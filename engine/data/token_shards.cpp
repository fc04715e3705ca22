// Reading (memory-mapped, every header field and token checked) and writing llm.c token shards.
#include "data/token_shards.h"

#include <fcntl.h>
#include <glob.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace {

constexpr int64_t kHeaderBytes = kTokenShardHeaderInts * 4;

struct FdCloser {
  int fd;
  ~FdCloser() {
    if (fd >= 0) ::close(fd);
  }
};

}  // namespace

std::vector<std::string> matchFiles(const std::string& pattern, std::string_view field) {
  glob_t matches{};
  const int rc = ::glob(pattern.c_str(), 0, nullptr, &matches);
  std::vector<std::string> files;
  if (rc == 0) {
    for (size_t i = 0; i < matches.gl_pathc; ++i) files.emplace_back(matches.gl_pathv[i]);
  }
  ::globfree(&matches);
  if (rc == GLOB_NOSPACE)
    RM_THROW(kIo, fmt::format("{}: out of memory matching '{}'", field, pattern));
  if (files.empty()) RM_THROW(kIo, fmt::format("{}: nothing matches '{}'", field, pattern));
  std::sort(files.begin(), files.end());
  return files;
}

std::unique_ptr<TokenShardDataset> TokenShardDataset::open(const std::string& pattern,
                                                           int64_t context, int64_t vocab_size,
                                                           std::string_view field) {
  std::unique_ptr<TokenShardDataset> dataset(new TokenShardDataset(context, vocab_size));
  dataset->files_ = matchFiles(pattern, field);
  std::vector<Run> runs;
  for (const std::string& file : dataset->files_) {
    const int fd = ::open(file.c_str(), O_RDONLY | O_CLOEXEC);
    if (fd < 0) {
      RM_THROW(kIo, fmt::format("{}: cannot open token shard {}: {}", field, file,
                                std::strerror(errno)));
    }
    FdCloser closer{fd};
    struct stat st {};
    if (::fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
      RM_THROW(kIo, fmt::format("{}: token shard {} is not a readable file", field, file));
    }
    const auto file_bytes = static_cast<int64_t>(st.st_size);
    if (file_bytes < kHeaderBytes) {
      RM_THROW(kFormat, fmt::format("{}: token shard {} is truncated: {} bytes, shorter than its "
                                    "{}-byte header",
                                    field, file, file_bytes, kHeaderBytes));
    }
    void* address = ::mmap(nullptr, static_cast<size_t>(file_bytes), PROT_READ, MAP_PRIVATE, fd, 0);
    if (address == MAP_FAILED) {
      RM_THROW(kIo,
               fmt::format("{}: cannot map token shard {}: {}", field, file, std::strerror(errno)));
    }
    dataset->mappings_.push_back({address, static_cast<size_t>(file_bytes)});

    int32_t header[3];
    std::memcpy(header, address, sizeof header);
    int width = 0;
    if (header[0] == kTokenShardMagicU16) {
      width = 2;
    } else if (header[0] == kTokenShardMagicU32) {
      width = 4;
    } else {
      RM_THROW(kFormat,
               fmt::format("{}: {} is not an llm.c token shard: magic {}, expected {} "
                           "(uint16 tokens) or {} (uint32 tokens)",
                           field, file, header[0], kTokenShardMagicU16, kTokenShardMagicU32));
    }
    if (header[1] != kTokenShardVersion) {
      RM_THROW(kFormat, fmt::format("{}: token shard {} has version {}, expected {}", field, file,
                                    header[1], kTokenShardVersion));
    }
    const int64_t count = header[2];
    if (count < 0) {
      RM_THROW(kFormat,
               fmt::format("{}: token shard {} has a negative token count {}", field, file, count));
    }
    const int64_t expected = kHeaderBytes + count * width;
    if (file_bytes < expected) {
      RM_THROW(kFormat, fmt::format("{}: token shard {} is truncated: its header says {} tokens "
                                    "({} bytes with the header), the file has {} bytes",
                                    field, file, count, expected, file_bytes));
    }
    if (file_bytes > expected) {
      RM_THROW(kFormat,
               fmt::format("{}: token shard {} has {} bytes after the {} tokens its header "
                           "counts",
                           field, file, file_bytes - expected, count));
    }
    if (windowsIn(count, context) == 0) {
      RM_THROW(kFormat, fmt::format("{}: token shard {} has {} tokens, fewer than one window of "
                                    "model.context + 1 = {}",
                                    field, file, count, context + 1));
    }
    const void* tokens = static_cast<const uint8_t*>(address) + kHeaderBytes;
    const int64_t bad = firstTokenAtLeast(tokens, count, width, vocab_size);
    if (bad >= 0) {
      uint32_t value = 0;
      std::memcpy(&value, static_cast<const uint8_t*>(tokens) + bad * width, width);
      if (width == 2) value &= 0xffff;
      RM_THROW(kFormat, fmt::format("{}: token shard {} has token {} at position {}, outside "
                                    "model.vocab_size {}",
                                    field, file, value, bad, vocab_size));
    }
    runs.push_back({tokens, count, width});
    dataset->token_count_ += count;
  }
  dataset->setRuns(std::move(runs));
  return dataset;
}

TokenShardDataset::~TokenShardDataset() {
  for (const Mapping& m : mappings_) ::munmap(m.address, m.bytes);
}

void writeTokenShard(const std::string& path, std::span<const uint32_t> tokens, bool wide) {
  RM_CHECK_ARG(tokens.size() <= 0x7fffffffu,
               fmt::format("{} tokens do not fit a shard header's int32 count", tokens.size()));
  std::vector<int32_t> header(kTokenShardHeaderInts, 0);
  header[0] = wide ? kTokenShardMagicU32 : kTokenShardMagicU16;
  header[1] = kTokenShardVersion;
  header[2] = static_cast<int32_t>(tokens.size());
  std::vector<uint8_t> bytes(kHeaderBytes + tokens.size() * (wide ? 4 : 2));
  std::memcpy(bytes.data(), header.data(), kHeaderBytes);
  for (size_t i = 0; i < tokens.size(); ++i) {
    if (wide) {
      std::memcpy(&bytes[kHeaderBytes + i * 4], &tokens[i], 4);
    } else {
      RM_CHECK_ARG(tokens[i] < 65536, fmt::format("token {} at position {} does not fit uint16 "
                                                  "(write the shard wide)",
                                                  tokens[i], i));
      const auto narrow = static_cast<uint16_t>(tokens[i]);
      std::memcpy(&bytes[kHeaderBytes + i * 2], &narrow, 2);
    }
  }
  std::FILE* f = std::fopen(path.c_str(), "wb");
  if (!f) RM_THROW(kIo, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  const bool ok = std::fwrite(bytes.data(), 1, bytes.size(), f) == bytes.size();
  if (std::fclose(f) != 0 || !ok) RM_THROW(kIo, fmt::format("cannot write {}", path));
}

}  // namespace ringmaster
