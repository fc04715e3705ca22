// Comparing two or more runs: loss and throughput overlaid (the median over each run's ranks,
// with its min / max envelope), the summary figures side by side (samples/s, final loss, step
// time, peak memory per rank, communication share, bubble) and the spec fields that differ. Read on
// a worker thread (BackgroundJobs); a zoom re-reads, and only the newest read reaches the screen.
#pragma once

#include <QWidget>
#include <vector>

#include "query/summary.h"
#include "widgets/metric_chart.h"

class QLabel;
class QTableView;

namespace ringmaster::ui {

class BackgroundJobs;
class CompareSummaryModel;
class SpecDifferencesModel;
class MetricChart;

class CompareView : public QWidget {
  Q_OBJECT

 public:
  // An unknown run id or an unreadable database is said in the view (errorText()) once read.
  CompareView(const std::string& db_path, std::vector<int64_t> run_ids, QWidget* parent = nullptr);

  MetricChart* lossChart() const { return loss_; }
  MetricChart* throughputChart() const { return throughput_; }
  QTableView* summaryTable() const { return summary_; }
  QTableView* differencesTable() const { return differences_; }
  CompareSummaryModel* summaryModel() const { return summary_model_; }
  SpecDifferencesModel* differencesModel() const { return differences_model_; }
  QString errorText() const;
  BackgroundJobs* jobs() const { return jobs_; }
  // Re-reads the runs off the GUI thread at the charts' current ranges.
  void reload();

 private:
  void applyComparison(const storage::RunComparison& comparison,
                       const std::vector<ChartLine>& loss_lines,
                       const std::vector<ChartLine>& throughput_lines);

  BackgroundJobs* jobs_ = nullptr;
  QLabel* error_ = nullptr;
  std::string db_path_;
  std::vector<int64_t> run_ids_;
  MetricChart* loss_ = nullptr;
  MetricChart* throughput_ = nullptr;
  QTableView* summary_ = nullptr;
  QTableView* differences_ = nullptr;
  CompareSummaryModel* summary_model_ = nullptr;
  SpecDifferencesModel* differences_model_ = nullptr;
};

}  // namespace ringmaster::ui
