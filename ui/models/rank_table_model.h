// Every rank of a run as a table: host, device, status, last step, samples/s, tokens/s and MFU
// (model FLOPs utilisation, where a peak was known), mean step and
// exposed-communication time, peak memory beside the spec's estimate for the rank (how far the
// prediction was off), the wait: its mean wait per collective for the last rank to arrive where
// measured (storage splits it from the ranks' starts), else its exposed communication per step,
// a straggler flag (the rank the others wait for: storage/query/comm_stats.h's rule) and the rank's
// device-mesh coordinates (dp, tp, pp). While a
// collective hangs, the status says what the rank waits on or holds up (storage/query/hang.h).
#pragma once

#include <optional>
#include <vector>

#include "data/run_snapshot.h"
#include "models/row_table_model.h"

namespace ringmaster::ui {

struct RankRow {
  int rank = 0;
  std::string host, device, status;
  int64_t last_step = 0;
  double samples_per_second = 0, mean_step_ms = 0;
  // The wait column: measured wait per collective, else exposed communication per step.
  double mean_exposed_comm_ms = 0;
  std::optional<double> mean_wait_ms, peers_mean_wait_ms;  // per collective, where measured
  std::optional<double> tokens_per_second, mfu;  // nullopt: not reported (older runs, no peak)
  int64_t peak_memory = 0;
  double estimated_memory = 0;  // 0: no estimate (a spec that does not parse)
  bool straggler = false;
  // The live hang view: what the rank waits on or holds up ("waiting 45 s in all_reduce #28",
  // "has not reached all_reduce #28, silent for 12 s"); empty while nothing is stuck.
  std::string waiting_on;
  MeshCoordinates coordinates;  // on the device mesh (dp, tp, pp)
};

// One row per rank of the world, from the run report's rank rows (a rank not heard from yet shows
// as "starting").
std::vector<RankRow> rankRows(const RunSnapshot& snapshot);

class RankTableModel : public RowTableModel<RankRow> {
  Q_OBJECT

 public:
  enum Column {
    kRank,
    kHost,
    kDevice,
    kStatus,
    kLastStep,
    kSamplesPerSecond,
    kTokensPerSecond,
    kMfu,
    kStepTime,
    kWait,
    kPeakMemory,
    kEstimatedMemory,
    kStraggler,
    kMesh,  // the rank's mesh coordinates
    kColumnCount
  };
  explicit RankTableModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  // The same world size is refreshed in place.
  void setRows(std::vector<RankRow> rows) { replaceRows(std::move(rows), true); }

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
};

}  // namespace ringmaster::ui
