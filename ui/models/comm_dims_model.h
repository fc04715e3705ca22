// Communication per mesh dimension (issue 34; storage/query/comm_by_dimension.h): a row per
// dimension the run's operations ran over (dp, tp, pp, world) with its ranks, operations, bytes,
// time per step and in all, the waits and its share of the run's communication; and a row per rank
// with its time per step in each dimension, the ranks in the run view's grouping order.
#pragma once

#include <vector>

#include "models/row_table_model.h"
#include "query/comm_by_dimension.h"
#include "spec/mesh_layout.h"

namespace ringmaster::ui {

class CommDimsModel : public RowTableModel<storage::DimensionComm> {
  Q_OBJECT

 public:
  enum Column {
    kDim,
    kRanks,
    kOperations,
    kBytes,
    kMsPerStep,
    kTotal,
    kShare,
    kWait,
    kExposed,
    kColumnCount
  };
  explicit CommDimsModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  void setDims(std::vector<storage::DimensionComm> dims);

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  double total_ms_ = 0;  // every dimension's, for the shares
};

// One rank's time per step in each dimension ("dp", "tp", "pp", "world"; 0 where it ran none).
struct RankDimsRow {
  int rank = 0;
  MeshCoordinates coordinates;
  double ms_per_step[4] = {0, 0, 0, 0};  // in storage's kCommDims order
};

// The per-rank rows of `comm` for the ranks in `order` (every rank of the world, as the rank
// table's grouping orders them).
std::vector<RankDimsRow> rankDimsRows(const storage::CommByDimension& comm,
                                      const std::vector<MeshCoordinates>& coordinates,
                                      const std::vector<int>& order);

class RankDimsModel : public RowTableModel<RankDimsRow> {
  Q_OBJECT

 public:
  enum Column { kRank, kMesh, kDp, kTp, kPp, kWorld, kColumnCount };
  explicit RankDimsModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  void setRows(std::vector<RankDimsRow> rows) { replaceRows(std::move(rows), true); }

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
};

}  // namespace ringmaster::ui
