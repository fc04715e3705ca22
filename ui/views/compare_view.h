// Comparing two or more runs: loss, throughput and any metric the runs recorded (picked from the
// union of their metrics, issue 33) overlaid (the median over each run's ranks, with its min / max
// envelope), the summary figures side by side (samples/s, final loss, step
// time, peak memory per rank, communication share, bubble) and the spec fields that differ. Read on
// a worker thread (BackgroundJobs); a zoom re-reads, and only the newest read reaches the screen.
// Issue 33: the runs on two axes (a scatter, X and Y any run figure or spec field), and "colour
// by" a spec field: runs with the same value share a colour in the scatter and the charts, with a
// legend.
#pragma once

#include <QWidget>
#include <vector>

#include <nlohmann/json.hpp>

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
class ScatterChart;

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
  // The scatter and its pickers (item data: a figure's id or a spec field's path; the colour
  // picker's first item, data "", colours each run alone), and the legend of the colours.
  ScatterChart* scatter() const { return scatter_; }
  QComboBox* xPicker() const { return x_picker_; }
  QComboBox* yPicker() const { return y_picker_; }
  QComboBox* colourPicker() const { return colour_picker_; }
  QString legendText() const;
  // Each run's colour as the charts and the scatter draw it.
  std::vector<QColor> runColours() const;
  // Re-reads the runs off the GUI thread at the charts' current ranges.
  void reload();

 private:
  struct Read;
  void applyComparison(Read read);
  void linkZoom();
  QWidget* makeScatterBox();
  // The pickers' items for these runs' figures and spec fields, keeping what was picked.
  void fillPickers();
  // The scatter, the legend and the charts' lines in the colours of the colour picker's field.
  void redrawScatter();

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
  ScatterChart* scatter_ = nullptr;
  QComboBox* x_picker_ = nullptr;
  QComboBox* y_picker_ = nullptr;
  QComboBox* colour_picker_ = nullptr;
  QLabel* legend_ = nullptr;
  std::vector<nlohmann::json> reports_;  // the runs' reports (query/run_report.h), as JSON
  std::vector<ChartLine> loss_lines_, throughput_lines_, metric_lines_;
};

}  // namespace ringmaster::ui
