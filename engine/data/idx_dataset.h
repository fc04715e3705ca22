// MNIST-style data from IDX files (the format of yann.lecun.com/exdb/mnist): unsigned-byte images
// of rows x cols pixels, scaled to [0, 1] like torchvision's ToTensor, and unsigned-byte labels.
// Only the unsigned-byte type code (0x08) is read; gzip'ed files must be unpacked first.
#pragma once

#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "data/dataset.h"

namespace ringmaster {

class IdxDataset : public ClassificationDataset {
 public:
  // Reads an images file (magic 0x00000803: count x rows x cols bytes) and a labels file (magic
  // 0x00000801: count bytes). classes == 0 takes max label + 1; otherwise every label must be below
  // `classes`. A missing or unreadable file is a kIo error; anything malformed (bad magic, type
  // code or dimensions, truncated or oversized file, empty file, counts that differ, a label out of
  // range) is a kFormat error naming the file and what was expected and found.
  static IdxDataset load(const std::string& images_path, const std::string& labels_path,
                         int64_t classes = 0);

  int64_t size() const override { return count_; }
  int64_t features() const override { return rows_ * cols_; }
  int64_t classes() const override { return classes_; }
  int64_t rows() const { return rows_; }
  int64_t cols() const { return cols_; }
  int32_t label(int64_t i) const { return labels_.at(static_cast<size_t>(i)); }

 private:
  IdxDataset() = default;
  void fillChecked(std::span<const int64_t> indices, float* features_out,
                   int32_t* labels_out) const override;

  int64_t count_ = 0, rows_ = 0, cols_ = 0, classes_ = 0;
  std::vector<uint8_t> pixels_;  // [count, rows * cols], scaled on the way out
  std::vector<int32_t> labels_;  // [count]
};

// Writes an unsigned-byte IDX file: magic 0x00 0x00 0x08 <dims.size()>, each dimension as a
// big-endian u32, then the bytes (whose count must be the product of dims). For tests and exports.
void writeIdx(const std::string& path, const std::vector<uint32_t>& dims,
              std::span<const uint8_t> data);

}  // namespace ringmaster
