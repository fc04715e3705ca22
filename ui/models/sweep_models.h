// The sweep tables (issue 37) as models over plain data: the sweeps of a database (one row per
// sweep), a sweep's members (one row per member: its number, from 1 as `ringmaster sweep` counts,
// each swept field's value, its state, run and run status, the run figures and the error;
// sortable, the best run marked) and the best run's spec differences from the others'. Read from
// storage's SweepRecord and sweepReport JSON.
#pragma once

#include <QAbstractTableModel>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "models/row_table_model.h"
#include "query/sweeps.h"

namespace ringmaster::ui {

class SweepListModel : public RowTableModel<storage::SweepRecord> {
  Q_OBJECT

 public:
  enum Column { kId, kName, kStatus, kMembers, kFields, kCreated, kColumnCount };
  static constexpr int kSweepIdRole = Qt::UserRole;

  explicit SweepListModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  void setSweeps(std::vector<storage::SweepRecord> sweeps);
  const storage::SweepRecord& sweepAt(int row) const { return rows().at(static_cast<size_t>(row)); }
  int rowOfSweep(int64_t sweep_id) const;

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
};

// The swept fields of a sweep's plan (NewSweep::plan_json's axes), in its order.
std::vector<std::string> sweptFields(const std::string& plan_json);

class SweepMembersModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  // The value a cell sorts by: a number for numbers, text otherwise; none sorts last either way.
  static constexpr int kSortRole = Qt::UserRole;

  explicit SweepMembersModel(QObject* parent = nullptr) : QAbstractTableModel(parent) {}

  // The report's members (sweep_report.h): a column per swept field, then the ranking figure
  // `rank_by` and every other run figure that a member has; the report's best run marked. The
  // rows keep the last sort (by its column's key, wherever that column now is).
  void setReport(const nlohmann::json& report, const std::string& rank_by);
  // The column the rows are sorted by (-1: plan order) and which way.
  int sortColumn() const { return columnOf(sort_key_); }
  Qt::SortOrder sortOrder() const { return sort_order_; }

  // Each column's key: "position", a swept field's path, "state", "run", "status", a figure's id,
  // "error"; and the column of a key (-1 for none).
  QString columnKey(int column) const;
  int columnOf(const QString& key) const;
  const nlohmann::json& memberAt(int row) const { return members_.at(static_cast<size_t>(row)); }
  std::optional<int64_t> runAt(int row) const;
  int rowOfRun(int64_t run_id) const;
  int rowOfPosition(int position) const;
  int bestRow() const;  // -1 where no run has the ranking figure

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;
  void sort(int column, Qt::SortOrder order = Qt::AscendingOrder) override;

 private:
  QVariant display(const nlohmann::json& member, const QString& key) const;
  QVariant sortValue(const nlohmann::json& member, const QString& key) const;
  // Sorts members_ by the last sort, without telling the view.
  void orderMembers();
  // Runs `change` (which reorders members_) with the view told, its persistent indexes following
  // their members.
  void reorder(const std::function<void()>& change);

  std::vector<QString> columns_;
  std::vector<nlohmann::json> members_;  // in the order shown
  std::optional<int64_t> best_run_;
  QString sort_key_;  // the key of the column sorted by; "" for none
  Qt::SortOrder sort_order_ = Qt::AscendingOrder;
};

// The best run's spec differences (the report's best.differences): one row per field, with the
// best run's value and the distinct values of the others.
struct SweepDifference {
  std::string field;
  std::string value;
  std::vector<std::string> others;
};

class SweepDifferencesModel : public RowTableModel<SweepDifference> {
  Q_OBJECT

 public:
  enum Column { kField, kBest, kOthers, kColumnCount };
  explicit SweepDifferencesModel(QObject* parent = nullptr) : RowTableModel(kColumnCount, parent) {}

  // The report's best (null: no rows).
  void setBest(const nlohmann::json& best);

  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::optional<int64_t> best_run_;
};

}  // namespace ringmaster::ui
