// Evaluations on the validation set as recorded (the eval event, train.eval_every): a run's rows in
// step order, and its latest. Every rank reports the same averaged loss; these read one rank's.
#pragma once

#include <cstdint>
#include <optional>
#include <vector>

#include "db/database.h"

namespace ringmaster::storage {

struct EvalPoint {
  int64_t step = 0;
  int rank = 0;
  std::optional<double> val_loss;    // absent: it was NaN or infinite
  std::optional<double> perplexity;  // absent: NaN or infinite (exp overflowed)
  int64_t tokens = 0;                // target tokens evaluated, all ranks together
  double eval_ms = 0;
  double time = 0;  // seconds since 1970
};

// The run's evaluations by step, as reported by the lowest rank that reported any (they agree);
// empty when the run has none.
std::vector<EvalPoint> loadEvals(const Database& db, int64_t run_id);
// The evaluation of the highest step, or nullopt when the run has none.
std::optional<EvalPoint> latestEval(const Database& db, int64_t run_id);

}  // namespace ringmaster::storage
