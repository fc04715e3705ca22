// Reading a text file as byte tokens and cutting it into its training and validation parts.
#include "data/text_dataset.h"

#include <cerrno>
#include <cmath>
#include <cstdio>
#include <cstring>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

std::unique_ptr<ByteTextDataset> ByteTextDataset::load(const std::string& path, int64_t context,
                                                       int64_t vocab_size, double val_fraction,
                                                       TextSplit split) {
  RM_CHECK_ARG(vocab_size >= kByteVocabulary,
               fmt::format("model.vocab_size must be at least {} for byte-level text, got {}",
                           kByteVocabulary, vocab_size));
  RM_CHECK_ARG(val_fraction > 0 && val_fraction < 1,
               fmt::format("data.val_fraction must be in (0, 1), got {}", val_fraction));
  std::FILE* f = std::fopen(path.c_str(), "rb");
  if (!f) RM_THROW(kIo, fmt::format("data.path: cannot open {}: {}", path, std::strerror(errno)));
  std::vector<uint8_t> all;
  uint8_t chunk[1 << 16];
  size_t got = 0;
  while ((got = std::fread(chunk, 1, sizeof chunk, f)) > 0)
    all.insert(all.end(), chunk, chunk + got);
  const bool failed = std::ferror(f) != 0;
  std::fclose(f);
  if (failed) RM_THROW(kIo, fmt::format("data.path: cannot read {}", path));

  const auto size = static_cast<int64_t>(all.size());
  const int64_t cut =
      size - static_cast<int64_t>(std::floor(static_cast<double>(size) * val_fraction));
  const bool train = split == TextSplit::kTrain;
  const int64_t begin = train ? 0 : cut, end = train ? cut : size;
  if (windowsIn(end - begin, context) == 0) {
    RM_THROW(kFormat, fmt::format("data.path: {} has {} bytes; its {} part ({} bytes, data."
                                  "val_fraction {}) is shorter than one window of model.context "
                                  "+ 1 = {} bytes",
                                  path, size, train ? "training" : "validation", end - begin,
                                  val_fraction, context + 1));
  }
  std::unique_ptr<ByteTextDataset> dataset(new ByteTextDataset(context, vocab_size));
  dataset->bytes_.assign(all.begin() + begin, all.begin() + end);
  dataset->setRuns({Run{dataset->bytes_.data(), end - begin, 1}});
  return dataset;
}

}  // namespace ringmaster
