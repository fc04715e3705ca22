// Comparing two or more runs: loss, throughput and any metric the runs recorded (picked from the
// union of their metrics, issue 33) overlaid (the median over each run's ranks, with its min / max
// envelope), the summary figures side by side (samples/s, final loss, step
// time, peak memory per rank, communication share, bubble) and the spec fields that differ. Read on
// a worker thread (BackgroundJobs); a zoom re-reads, and only the newest read reaches the screen.
#pragma once

#include <QWidget>
#include <vector>

#include "query/summary.h"
#include "widgets/metric_chart.h"

class QComboBox;
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
  // The chart of the metric picked (metricChoice: every metric of the runs, by name).
  MetricChart* metricChart() const { return metric_chart_; }
  QComboBox* metricChoice() const { return metric_choice_; }
  // Overlays this metric (one of metricChoice's) and reads it.
  void showMetric(const QString& metric);
  QTableView* summaryTable() const { return summary_; }
  QTableView* differencesTable() const { return differences_; }
  CompareSummaryModel* summaryModel() const { return summary_model_; }
  SpecDifferencesModel* differencesModel() const { return differences_model_; }
  QString errorText() const;
  BackgroundJobs* jobs() const { return jobs_; }
  // Re-reads the runs off the GUI thread at the charts' current ranges.
  void reload();

 private:
  struct Read;
  void applyComparison(Read read);
  void linkZoom();

  BackgroundJobs* jobs_ = nullptr;
  QLabel* error_ = nullptr;
  std::string db_path_;
  std::vector<int64_t> run_ids_;
  MetricChart* loss_ = nullptr;
  MetricChart* throughput_ = nullptr;
  MetricChart* metric_chart_ = nullptr;
  QComboBox* metric_choice_ = nullptr;
  std::string metric_;  // the metric overlaid; "" until the first read picks one
  QTableView* summary_ = nullptr;
  QTableView* differences_ = nullptr;
  CompareSummaryModel* summary_model_ = nullptr;
  SpecDifferencesModel* differences_model_ = nullptr;
};

}  // namespace ringmaster::ui
