// ByteTextDataset: a text file tokenised at the byte level (token = byte, vocabulary 256), split
// into a training part (the start) and a validation part (the last val_fraction of the bytes), each
// served as next-token windows (token_windows.h). No merges or normalisation: UTF-8 characters
// beyond ASCII become several tokens.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "data/token_windows.h"

namespace ringmaster {

inline constexpr int64_t kByteVocabulary = 256;

enum class TextSplit { kTrain, kValidation };

class ByteTextDataset : public TokenWindowDataset {
 public:
  // Reads `path` and keeps `split`'s part: bytes [0, cut) for training and [cut, size) for
  // validation, cut = size - floor(size * val_fraction). A missing or unreadable file is kIo
  // (naming it); a part too short for one window of context + 1 bytes is kFormat (naming the file,
  // the part and its length); vocab_size < 256 or val_fraction outside (0, 1) is kInvalidArgument.
  static std::unique_ptr<ByteTextDataset> load(const std::string& path, int64_t context,
                                               int64_t vocab_size, double val_fraction,
                                               TextSplit split);

  // The part's bytes (its tokens).
  const std::vector<uint8_t>& bytes() const { return bytes_; }

 private:
  ByteTextDataset(int64_t context, int64_t vocab_size) : TokenWindowDataset(context, vocab_size) {}
  std::vector<uint8_t> bytes_;
};

}  // namespace ringmaster
