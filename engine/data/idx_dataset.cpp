// Reading and writing unsigned-byte IDX files, with a precise error for each way a file can be
// malformed.
#include "data/idx_dataset.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <limits>
#include <memory>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

namespace {

constexpr uint8_t kUnsignedByte = 0x08;

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};
using File = std::unique_ptr<std::FILE, FileCloser>;

uint32_t readBigEndian32(const uint8_t* p) {
  return (uint32_t{p[0]} << 24) | (uint32_t{p[1]} << 16) | (uint32_t{p[2]} << 8) | uint32_t{p[3]};
}

const char* typeCodeName(uint8_t code) {
  switch (code) {
    case 0x08:
      return "unsigned byte";
    case 0x09:
      return "signed byte";
    case 0x0B:
      return "short";
    case 0x0C:
      return "int";
    case 0x0D:
      return "float";
    case 0x0E:
      return "double";
  }
  return "not an IDX type";
}

// An IDX file opened and checked before its elements are read: its dimensions, its header size,
// and the open file positioned at the first element.
struct IdxArray {
  std::vector<uint32_t> dims;
  uint64_t elements = 0;
  File file;
};

// Reads exactly `size` bytes at the file's position into `out`.
void readExactly(const IdxArray& array, const std::string& path, uint8_t* out, uint64_t size) {
  if (size > 0 && std::fread(out, 1, size, array.file.get()) != size) {
    if (std::ferror(array.file.get())) {
      RM_THROW(kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
    }
    RM_THROW(kFormat,
             fmt::format("{}: truncated while it was read (was it changed meanwhile?)", path));
  }
}

// Opens an unsigned-byte IDX file of `expected_dims` dimensions and checks, before any element is
// read, its header, and that the file's size (fstat) is exactly the header plus the product of
// the dimensions (computed without overflow): nothing is allocated from a header the file cannot
// back. Only a regular file is read (not a FIFO or a device such as /dev/zero). `what` names its
// role in messages ("images", "labels").
IdxArray openIdx(const std::string& path, int expected_dims, const char* what) {
  IdxArray array;
  // O_NONBLOCK: opening a FIFO without a writer must not hang before it is refused.
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NONBLOCK);
  if (fd < 0) RM_THROW(kIo, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  array.file.reset(::fdopen(fd, "rb"));
  if (!array.file) {
    ::close(fd);
    RM_THROW(kIo, fmt::format("cannot open {}: {}", path, std::strerror(errno)));
  }
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    RM_THROW(kIo, fmt::format("cannot read {}: {}", path, std::strerror(errno)));
  }
  if (!S_ISREG(info.st_mode)) {
    RM_THROW(kFormat, fmt::format("{}: not a regular file (a directory, FIFO or device); IDX {} "
                                  "are read from a file of known size",
                                  path, what));
  }
  const uint64_t file_size = static_cast<uint64_t>(info.st_size);
  const uint32_t expected_magic = (uint32_t{kUnsignedByte} << 8) | uint32_t(expected_dims);
  if (file_size == 0) {
    RM_THROW(kFormat, fmt::format("{}: empty file, expected an IDX {} file (magic 0x{:08X})", path,
                                  what, expected_magic));
  }
  if (file_size < 4) {
    RM_THROW(kFormat,
             fmt::format("{}: truncated: expected at least 4 bytes of IDX header, found {}", path,
                         file_size));
  }
  uint8_t head[4];
  readExactly(array, path, head, 4);
  const uint32_t magic = readBigEndian32(head);
  if (head[0] != 0 || head[1] != 0) {
    RM_THROW(kFormat, fmt::format("{}: bad magic number 0x{:08X}, expected 0x{:08X} (IDX {}); is "
                                  "this an IDX file (unpack .gz files first)?",
                                  path, magic, expected_magic, what));
  }
  const uint8_t type = head[2];
  if (type != kUnsignedByte) {
    RM_THROW(kFormat, fmt::format("{}: unsupported IDX type code 0x{:02X} ({}) in magic number "
                                  "0x{:08X}; only 0x08 (unsigned byte) is supported",
                                  path, type, typeCodeName(type), magic));
  }
  const int dims = head[3];
  if (dims != expected_dims) {
    RM_THROW(kFormat, fmt::format("{}: bad magic number 0x{:08X}, expected 0x{:08X}: IDX {} have "
                                  "{} dimension(s), this file has {}",
                                  path, magic, expected_magic, what, expected_dims, dims));
  }
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(dims);
  if (file_size < header) {
    RM_THROW(kFormat, fmt::format("{}: truncated: expected {} bytes of IDX header, found {}", path,
                                  header, file_size));
  }
  uint8_t sizes[4 * 255];
  readExactly(array, path, sizes, header - 4);
  // At most 3 factors below 2^32: the product and the header fit in 128 bits.
  unsigned __int128 elements = 1;
  for (int d = 0; d < dims; ++d) {
    array.dims.push_back(readBigEndian32(sizes + 4 * d));
    elements *= array.dims.back();
  }
  const unsigned __int128 expected_size = header + elements;
  if (expected_size != file_size) {
    std::string dims_str;
    for (uint32_t d : array.dims) dims_str += fmt::format("{}{}", dims_str.empty() ? "" : " x ", d);
    const bool truncated = file_size < expected_size;
    const std::string expected = expected_size <= std::numeric_limits<uint64_t>::max()
                                     ? fmt::format("{}", static_cast<uint64_t>(expected_size))
                                     : "more than 2^64";
    RM_THROW(kFormat,
             fmt::format("{}: {}: expected {} bytes ({}-byte header + {} {}), found {}", path,
                         truncated ? "truncated" : "trailing bytes after the data", expected,
                         header, dims_str, dims == 1 ? "labels" : "pixels", file_size));
  }
  array.elements = static_cast<uint64_t>(elements);
  return array;
}

void writeAll(std::FILE* file, const std::string& path, const void* data, size_t size) {
  if (size > 0 && std::fwrite(data, 1, size, file) != size) {
    RM_THROW(kIo, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
}

}  // namespace

IdxDataset IdxDataset::load(const std::string& images_path, const std::string& labels_path,
                            int64_t classes) {
  RM_CHECK_ARG(classes >= 0, fmt::format("classes must be >= 0, got {}", classes));
  // Both headers are checked against their files' sizes before either file's data is read.
  IdxArray images = openIdx(images_path, 3, "images");
  IdxArray labels = openIdx(labels_path, 1, "labels");
  if (images.dims[0] != labels.dims[0]) {
    RM_THROW(kFormat, fmt::format("{} holds {} images, but {} holds {} labels: the counts must "
                                  "match",
                                  images_path, images.dims[0], labels_path, labels.dims[0]));
  }
  if (images.dims[0] > 0 && (images.dims[1] == 0 || images.dims[2] == 0)) {
    RM_THROW(kFormat, fmt::format("{}: images of {} x {} pixels hold no pixels", images_path,
                                  images.dims[1], images.dims[2]));
  }

  // The files are real, but may be sparse: what they ask for must fit in this machine's memory.
  const unsigned __int128 needed = images.elements + labels.elements * sizeof(int32_t);
  const uint64_t memory = static_cast<uint64_t>(::sysconf(_SC_PHYS_PAGES)) *
                          static_cast<uint64_t>(::sysconf(_SC_PAGESIZE));
  if (needed > memory) {
    RM_THROW(kUnavailable,
             fmt::format("{} and {} need {} bytes of memory, more than the {} of "
                         "this machine",
                         images_path, labels_path, static_cast<uint64_t>(needed), memory));
  }

  IdxDataset dataset;
  dataset.count_ = images.dims[0];
  dataset.rows_ = images.dims[1];
  dataset.cols_ = images.dims[2];
  dataset.pixels_.resize(images.elements);
  readExactly(images, images_path, dataset.pixels_.data(), images.elements);
  std::vector<uint8_t> label_bytes(labels.elements);
  readExactly(labels, labels_path, label_bytes.data(), labels.elements);
  dataset.labels_.assign(label_bytes.begin(), label_bytes.end());
  int32_t max_label = -1;
  for (int32_t label : dataset.labels_) max_label = std::max(max_label, label);
  if (classes == 0) {
    dataset.classes_ = max_label + 1;
  } else {
    dataset.classes_ = classes;
    for (int64_t i = 0; i < dataset.count_; ++i) {
      if (dataset.labels_[i] >= classes) {
        RM_THROW(kFormat, fmt::format("{}: label {} of sample {} is not below the {} classes",
                                      labels_path, dataset.labels_[i], i, classes));
      }
    }
  }
  return dataset;
}

void IdxDataset::fillChecked(std::span<const int64_t> indices, float* features_out,
                             int32_t* labels_out) const {
  const int64_t f = features();
  for (size_t k = 0; k < indices.size(); ++k) {
    const uint8_t* pixels = pixels_.data() + indices[k] * f;
    float* out = features_out + static_cast<int64_t>(k) * f;
    // As torchvision: img.float().div(255), a float32 division.
    for (int64_t j = 0; j < f; ++j) out[j] = static_cast<float>(pixels[j]) / 255.0f;
    labels_out[k] = labels_[indices[k]];
  }
}

void writeIdx(const std::string& path, const std::vector<uint32_t>& dims,
              std::span<const uint8_t> data) {
  RM_CHECK_ARG(dims.size() <= 255,
               fmt::format("an IDX file has at most 255 dimensions, got {}", dims.size()));
  unsigned __int128 elements = 1;
  for (uint32_t d : dims) elements *= d;
  RM_CHECK_ARG(elements == data.size(),
               fmt::format("{}: {} bytes of data for dimensions whose product is {}", path,
                           data.size(), static_cast<uint64_t>(elements)));
  std::vector<uint8_t> header{0, 0, kUnsignedByte, static_cast<uint8_t>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) header.push_back(static_cast<uint8_t>(d >> shift));
  }
  File file(std::fopen(path.c_str(), "wb"));
  if (!file) RM_THROW(kIo, fmt::format("cannot create {}: {}", path, std::strerror(errno)));
  writeAll(file.get(), path, header.data(), header.size());
  writeAll(file.get(), path, data.data(), data.size());
  if (std::fclose(file.release()) != 0) {
    RM_THROW(kIo, fmt::format("cannot write {}: {}", path, std::strerror(errno)));
  }
}

}  // namespace ringmaster
