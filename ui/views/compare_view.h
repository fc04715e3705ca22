// Comparing two or more runs: loss and throughput overlaid (the median over each run's ranks,
// with its min / max envelope), the summary figures side by side (samples/s, final loss, step
// time, peak memory per rank, communication share, bubble) and the spec fields that differ.
#pragma once

#include <QWidget>
#include <vector>

#include "query/summary.h"

class QTableWidget;

namespace ringmaster::ui {

class MetricChart;

class CompareView : public QWidget {
  Q_OBJECT

 public:
  // Throws kInvalidArgument for an unknown run id, kIo for an unreadable database.
  CompareView(const std::string& db_path, std::vector<int64_t> run_ids, QWidget* parent = nullptr);

  MetricChart* lossChart() const { return loss_; }
  MetricChart* throughputChart() const { return throughput_; }
  QTableWidget* summaryTable() const { return summary_; }
  QTableWidget* differencesTable() const { return differences_; }
  void reload();

 private:
  std::string db_path_;
  std::vector<int64_t> run_ids_;
  MetricChart* loss_ = nullptr;
  MetricChart* throughput_ = nullptr;
  QTableWidget* summary_ = nullptr;
  QTableWidget* differences_ = nullptr;
};

}  // namespace ringmaster::ui
