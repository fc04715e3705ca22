// Digits drawn from polyline templates in a unit box, mapped to 28 x 28 pixels with per-sample
// jitter, antialiased by distance to the strokes, then noised; written with writeIdx.
#include "data/digits_idx.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include <fmt/format.h>

#include "core/error.h"
#include "core/random.h"
#include "data/idx_dataset.h"

namespace ringmaster {

namespace {

struct Point {
  double x, y;  // unit box: x right, y down, both in [0, 1]
};
using Stroke = std::vector<Point>;

// An elliptical arc from angle a0 to a1 (radians, 0 = right, clockwise on screen), as a polyline.
Stroke arc(double cx, double cy, double rx, double ry, double a0, double a1, int points = 14) {
  Stroke stroke;
  for (int i = 0; i <= points; ++i) {
    const double a = a0 + (a1 - a0) * i / points;
    stroke.push_back({cx + rx * std::cos(a), cy + ry * std::sin(a)});
  }
  return stroke;
}

constexpr double kPi = 3.14159265358979323846;

// The strokes of each digit.
const std::vector<std::vector<Stroke>>& templates() {
  static const std::vector<std::vector<Stroke>> digits = {
      {arc(0.5, 0.5, 0.38, 0.48, 0, 2 * kPi, 20)},
      {{{0.3, 0.2}, {0.55, 0.0}, {0.55, 1.0}}},
      {{{0.1, 0.25}, {0.3, 0.03}, {0.7, 0.03}, {0.9, 0.25}, {0.85, 0.45}, {0.1, 1.0}, {0.9, 1.0}}},
      {{{0.1, 0.05},
        {0.9, 0.05},
        {0.45, 0.42},
        {0.85, 0.62},
        {0.8, 0.9},
        {0.45, 1.0},
        {0.1, 0.88}}},
      {{{0.7, 1.0}, {0.7, 0.0}, {0.05, 0.68}, {0.95, 0.68}}},
      {{{0.9, 0.0},
        {0.18, 0.0},
        {0.12, 0.45},
        {0.6, 0.38},
        {0.9, 0.62},
        {0.75, 0.95},
        {0.1, 0.95}}},
      {{{0.8, 0.0}, {0.35, 0.25}, {0.12, 0.65}},
       arc(0.5, 0.72, 0.38, 0.28, kPi * 1.0, kPi * 3.0, 16)},
      {{{0.05, 0.0}, {0.95, 0.0}, {0.4, 1.0}}},
      {arc(0.5, 0.25, 0.3, 0.24, 0, 2 * kPi, 16), arc(0.5, 0.72, 0.38, 0.27, 0, 2 * kPi, 16)},
      {arc(0.45, 0.3, 0.35, 0.3, 0, 2 * kPi, 16), {{0.8, 0.3}, {0.68, 1.0}}},
  };
  return digits;
}

double distanceToSegment(Point p, Point a, Point b) {
  const double dx = b.x - a.x, dy = b.y - a.y;
  const double length2 = dx * dx + dy * dy;
  double t = length2 > 0 ? ((p.x - a.x) * dx + (p.y - a.y) * dy) / length2 : 0;
  t = std::clamp(t, 0.0, 1.0);
  const double ex = a.x + t * dx - p.x, ey = a.y + t * dy - p.y;
  return std::sqrt(ex * ex + ey * ey);
}

}  // namespace

std::vector<uint8_t> drawDigit(int digit, uint64_t seed, uint64_t index) {
  RM_CHECK_ARG(digit >= 0 && digit < kDigitsClasses,
               fmt::format("drawDigit: digit {} is not in 0 ... 9", digit));
  Rng rng(mix64(seed) ^ mix64(index + 0x5EEDull));
  // The box: about MNIST's 20-pixel digit height, centred with a few pixels of play.
  const double scale = rng.uniform(0.8, 1.05);
  const double height = 20 * scale, width = 15 * scale;
  const double cx = kDigitsSide / 2.0 + rng.uniform(-2.5, 2.5);
  const double cy = kDigitsSide / 2.0 + rng.uniform(-2.0, 2.0);
  const double slant = rng.uniform(-0.3, 0.3);
  const double half_width = rng.uniform(0.9, 1.6);  // stroke, pixels
  const double ink = rng.uniform(0.75, 1.0);

  // The template in pixels, each point moved a little.
  std::vector<Stroke> strokes = templates()[static_cast<size_t>(digit)];
  for (Stroke& stroke : strokes) {
    for (Point& point : stroke) {
      const double ux = point.x + rng.uniform(-0.04, 0.04);
      const double uy = point.y + rng.uniform(-0.04, 0.04);
      const double y = cy + (uy - 0.5) * height;
      point = {cx + (ux - 0.5) * width - slant * (y - cy), y};
    }
  }

  std::vector<uint8_t> pixels(kDigitsSide * kDigitsSide);
  for (int row = 0; row < kDigitsSide; ++row) {
    for (int col = 0; col < kDigitsSide; ++col) {
      const Point centre{col + 0.5, row + 0.5};
      double nearest = 1e9;
      for (const Stroke& stroke : strokes)
        for (size_t i = 0; i + 1 < stroke.size(); ++i)
          nearest = std::min(nearest, distanceToSegment(centre, stroke[i], stroke[i + 1]));
      // Full ink inside the stroke, a one-pixel ramp at its edge, then noise.
      double value = ink * std::clamp(half_width + 0.5 - nearest, 0.0, 1.0);
      value += rng.normal() * 0.03;
      pixels[static_cast<size_t>(row * kDigitsSide + col)] =
          static_cast<uint8_t>(std::lround(std::clamp(value, 0.0, 1.0) * 255));
    }
  }
  return pixels;
}

IdxFilePair writeDigitsIdx(const std::string& dir, int64_t count, uint64_t seed) {
  RM_CHECK_ARG(count >= 1 && count <= 10'000'000,
               fmt::format("the number of samples must be 1 ... 10000000, got {}", count));
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) RM_THROW(kIo, fmt::format("cannot create the directory {}: {}", dir, ec.message()));
  const size_t image_bytes = kDigitsSide * kDigitsSide;
  std::vector<uint8_t> images(static_cast<size_t>(count) * image_bytes);
  std::vector<uint8_t> labels(static_cast<size_t>(count));
  Rng label_rng(mix64(seed) ^ 0x1ABE15ull);
  for (int64_t i = 0; i < count; ++i) {
    const int digit = static_cast<int>(label_rng.below(kDigitsClasses));
    labels[static_cast<size_t>(i)] = static_cast<uint8_t>(digit);
    const std::vector<uint8_t> image = drawDigit(digit, seed, static_cast<uint64_t>(i));
    std::copy(image.begin(), image.end(), images.begin() + static_cast<ptrdiff_t>(i * image_bytes));
  }
  IdxFilePair files{(std::filesystem::path(dir) / "train-images-idx3-ubyte").string(),
                    (std::filesystem::path(dir) / "train-labels-idx1-ubyte").string()};
  const auto n = static_cast<uint32_t>(count);
  writeIdx(files.images, {n, kDigitsSide, kDigitsSide}, images);
  writeIdx(files.labels, {n}, labels);
  return files;
}

}  // namespace ringmaster
