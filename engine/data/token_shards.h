// llm.c's token shards (karpathy/llm.c, dev/data/data_common.py): a header of 256 little-endian
// int32 (magic 20240520 for uint16 tokens or 20240801 for uint32 tokens, version 1, token count),
// then the tokens. TokenShardDataset memory-maps the shards a glob matches and serves them as
// next-token windows (token_windows.h); writeTokenShard writes one, for tests and exports.
// It does not tokenise: the shards come from llm.c's (or any) preprocessing scripts.
#pragma once

#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "data/token_windows.h"

namespace ringmaster {

inline constexpr int32_t kTokenShardMagicU16 = 20240520;
inline constexpr int32_t kTokenShardMagicU32 = 20240801;
inline constexpr int32_t kTokenShardVersion = 1;
inline constexpr int64_t kTokenShardHeaderInts = 256;

// The files a glob pattern matches, sorted by name (byte order). `field` names the pattern in
// errors: a pattern that matches nothing is a kIo error "<field>: nothing matches '<pattern>'".
std::vector<std::string> matchFiles(const std::string& pattern, std::string_view field);

class TokenShardDataset : public TokenWindowDataset {
 public:
  // Maps every shard `pattern` matches (in sorted order) and checks each: a missing or unreadable
  // file is kIo; a bad magic or version, a file shorter or longer than its header's count says, a
  // shard too short for one window of context + 1 tokens, or a token >= vocab_size (with its
  // position) is kFormat, each naming the file. `field` names the pattern ("data.train").
  static std::unique_ptr<TokenShardDataset> open(const std::string& pattern, int64_t context,
                                                 int64_t vocab_size, std::string_view field);
  ~TokenShardDataset() override;
  TokenShardDataset(const TokenShardDataset&) = delete;
  TokenShardDataset& operator=(const TokenShardDataset&) = delete;

  const std::vector<std::string>& files() const { return files_; }
  // Tokens in every shard together.
  int64_t tokenCount() const { return token_count_; }

 private:
  struct Mapping {
    void* address = nullptr;
    size_t bytes = 0;
  };
  TokenShardDataset(int64_t context, int64_t vocab_size)
      : TokenWindowDataset(context, vocab_size) {}

  std::vector<std::string> files_;
  std::vector<Mapping> mappings_;
  int64_t token_count_ = 0;
};

// Writes `tokens` as an llm.c shard: uint16 tokens (magic 20240520) when `wide` is false (every
// token must then be below 65536), uint32 tokens (magic 20240801) otherwise.
void writeTokenShard(const std::string& path, std::span<const uint32_t> tokens, bool wide = false);

}  // namespace ringmaster
