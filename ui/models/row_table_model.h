// A table model over a vector of plain rows, the base of the views' tables: replacing the rows
// resets the view only when they are not the same rows (a live refresh of the same rows is a
// dataChanged, so selection and scroll position survive it).
#pragma once

#include <QAbstractTableModel>
#include <vector>

namespace ringmaster::ui {

template <typename Row>
class RowTableModel : public QAbstractTableModel {
 public:
  RowTableModel(int columns, QObject* parent) : QAbstractTableModel(parent), columns_(columns) {}

  const std::vector<Row>& rows() const { return rows_; }

  int rowCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : static_cast<int>(rows_.size());
  }
  int columnCount(const QModelIndex& parent = {}) const override {
    return parent.isValid() ? 0 : columns_;
  }

 protected:
  // `same_rows`: the new rows stand for the old ones, in the same order.
  void replaceRows(std::vector<Row> rows, bool same_rows) {
    if (!same_rows || rows.size() != rows_.size()) {
      beginResetModel();
      rows_ = std::move(rows);
      endResetModel();
      return;
    }
    rows_ = std::move(rows);
    if (!rows_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, columns_ - 1));
  }
  // The row of a valid index of this model; nullptr for any other.
  const Row* rowAt(const QModelIndex& index) const {
    if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
      return nullptr;
    return &rows_[static_cast<size_t>(index.row())];
  }

 private:
  int columns_;
  std::vector<Row> rows_;
};

}  // namespace ringmaster::ui
