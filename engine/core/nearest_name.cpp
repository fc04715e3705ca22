// The nearest-name suggestion of nearest_name.h.
#include "core/nearest_name.h"

#include <algorithm>
#include <cctype>

namespace ringmaster {

std::size_t editDistance(std::string_view a, std::string_view b) {
  auto lower = [](char c) {
    return static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  };
  std::vector<std::vector<std::size_t>> d(a.size() + 1, std::vector<std::size_t>(b.size() + 1));
  for (std::size_t i = 0; i <= a.size(); ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= b.size(); ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) &&
          lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[a.size()][b.size()];
}

std::string_view closestName(std::string_view name,
                             const std::vector<std::string_view>& candidates) {
  const std::size_t allowed = name.size() <= 3 ? 1 : name.size() <= 8 ? 2 : 3;
  std::string_view best;
  std::size_t best_distance = allowed + 1;
  for (std::string_view candidate : candidates) {
    const std::size_t distance = editDistance(name, candidate);
    if (distance < best_distance && distance < std::max(name.size(), candidate.size())) {
      best = candidate;
      best_distance = distance;
    }
  }
  return best;
}

}  // namespace ringmaster
