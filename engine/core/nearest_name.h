// The "did you mean ...?" of every place that refuses a name: the candidate nearest a mistyped
// name, when it is near enough to read as a typo of it. Used for a spec's unknown keys (and so
// `--set`) and for `ringmaster`'s unknown subcommands.
#pragma once

#include <cstddef>
#include <string_view>
#include <vector>

namespace ringmaster {

// Optimal string alignment distance (insertions, deletions, substitutions and transpositions of
// two neighbours), ignoring ASCII case.
std::size_t editDistance(std::string_view a, std::string_view b);

// The candidate closest to `name` within a distance that still reads as a typo of it (1 for a
// name of up to 3 characters, 2 up to 8, else 3), the first of equals; "" when none is.
std::string_view closestName(std::string_view name,
                             const std::vector<std::string_view>& candidates);

}  // namespace ringmaster
