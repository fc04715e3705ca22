// A small MNIST-shaped data set made on the spot, for trying the `idx` data kind without
// downloading MNIST: handwriting-like digits drawn from stroke templates, each sample jittered
// (position, size, slant, stroke width, every template point) and noised, written as the IDX files
// MNIST ships. It is not MNIST and claims no MNIST accuracy; it is learnable, and no two samples
// are alike. `ringmaster-node make-idx DIR` writes it.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ringmaster {

inline constexpr int kDigitsSide = 28;  // pixels per row and per column, as MNIST
inline constexpr int kDigitsClasses = 10;

// One image (kDigitsSide x kDigitsSide bytes, row-major, 0 background) of `digit` (0-9) drawn
// with the jitter and noise of sample `index` of the stream `seed`: the same arguments give the
// same bytes on every machine.
std::vector<uint8_t> drawDigit(int digit, uint64_t seed, uint64_t index);

struct IdxFilePair {
  std::string images;  // DIR/train-images-idx3-ubyte: count x 28 x 28 unsigned bytes
  std::string labels;  // DIR/train-labels-idx1-ubyte: count labels, 0-9
};

// Writes `count` samples (labels drawn uniformly) into `dir`, creating it, under MNIST's training
// file names; returns the two paths. Throws kInvalidArgument for a count outside 1 ... 10^7 and
// kIo when the files cannot be written.
IdxFilePair writeDigitsIdx(const std::string& dir, int64_t count, uint64_t seed);

}  // namespace ringmaster
