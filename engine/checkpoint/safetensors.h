// Reading and writing the safetensors format (huggingface/safetensors): an 8-byte little-endian
// header length N, N bytes of JSON header naming each tensor's dtype, shape and data_offsets (plus
// an optional "__metadata__" string map), then the raw little-endian tensor bytes. Files are
// written atomically and read with every header field checked; memory mapping is not offered.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "tensor/tensor.h"

namespace ringmaster {

struct SafetensorsFile {
  std::map<std::string, Tensor> tensors;  // on the host
  std::map<std::string, std::string> metadata;
};

// The largest header we read (as the reference implementation: 100 MB).
inline constexpr uint64_t kSafetensorsMaxHeaderBytes = 100'000'000;

// Writes `tensors` (copied to the host first when on CUDA) and `metadata` to path + ".tmp" (with
// `mode` whatever the umask; by default 0600: weights are the owner's), fsyncs it, renames it to
// `path` and fsyncs the directory, so a crash leaves either the old file or the new one, never half
// a file. The data is laid out like the reference writer's: by element size, largest first, then by
// name, so every tensor is aligned to its element size; the header is padded with spaces to a
// multiple of 8 bytes. Duplicate or reserved ("__metadata__") names and undefined tensors are
// kInvalidArgument errors; failing I/O is kIo (and removes the .tmp file).
void saveSafetensors(const std::string& path,
                     const std::vector<std::pair<std::string, Tensor>>& tensors,
                     const std::map<std::string, std::string>& metadata = {}, unsigned mode = 0600);

// Reads a whole file into host tensors. A missing or unreadable file is kIo; anything malformed is
// a kFormat error naming the file (and the tensor): a header length beyond the file or over the
// limit, a header that is not JSON or not an object, duplicate keys, an unknown dtype, a bad shape
// or data_offsets, a byte size that does not match shape x dtype, offsets out of bounds or
// overlapping, and data bytes that belong to no tensor.
SafetensorsFile loadSafetensors(const std::string& path);

}  // namespace ringmaster
