// Evaluation queries: the evals table read for the lowest reporting rank, in step order.
#include "query/evals.h"

#include "db/statement.h"

namespace ringmaster::storage {

namespace {

constexpr const char* kColumns =
    "SELECT step, rank, val_loss, perplexity, tokens, eval_ms, t FROM evals WHERE run_id = ?1 AND "
    "rank = (SELECT min(rank) FROM evals WHERE run_id = ?1)";

EvalPoint readPoint(const Statement& row) {
  return EvalPoint{.step = row.columnInt(0),
                   .rank = static_cast<int>(row.columnInt(1)),
                   .val_loss = row.optionalDouble(2),
                   .perplexity = row.optionalDouble(3),
                   .tokens = row.columnInt(4),
                   .eval_ms = row.columnDouble(5),
                   .time = row.columnDouble(6)};
}

}  // namespace

std::vector<EvalPoint> loadEvals(const Database& db, int64_t run_id) {
  Statement select(db, std::string(kColumns) + " ORDER BY step");
  select.bind(1, run_id);
  std::vector<EvalPoint> points;
  while (select.run()) points.push_back(readPoint(select));
  return points;
}

std::optional<EvalPoint> latestEval(const Database& db, int64_t run_id) {
  Statement select(db, std::string(kColumns) + " ORDER BY step DESC LIMIT 1");
  select.bind(1, run_id);
  if (!select.run()) return std::nullopt;
  return readPoint(select);
}

}  // namespace ringmaster::storage
