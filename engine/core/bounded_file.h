// Reading a whole input file only after its size is known to be within a bound: the size of a
// regular file is checked with fstat before anything is read, and anything else (a FIFO, a
// device such as /dev/zero) is read up to the bound and refused beyond it. Not for large data
// files, which check their header first (data/idx_dataset.cpp).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace ringmaster {

// "1 MiB", "64 KiB", "12 bytes".
std::string describeBytes(uint64_t bytes);

// Reads the file at `path`, at most `max_bytes` of it. `what` names its role in messages ("job
// spec", "hosts file"). Throws Error kIo when it cannot be opened or read, and kFormat, naming the
// file, its size and the bound, when it holds more than `max_bytes`.
std::string readBoundedFile(const std::string& path, uint64_t max_bytes, std::string_view what);

}  // namespace ringmaster
