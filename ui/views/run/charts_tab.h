// The run view's Charts tab: one MetricChart per chart the run shows (ui/charts/chart_table.h: the
// table's that apply, and one per metric of the run's own), in a group box per panel (the metric
// name's prefix before '/'), with the controls they share (which ranks, smoothing, wall-time axis,
// export) and their zoom linked. It says what to read (addRequests) and draws what was read
// (apply); it never reads storage.
#pragma once

#include <QWidget>
#include <deque>
#include <map>
#include <string>
#include <vector>

#include "charts/chart_table.h"
#include "data/rank_groups.h"
#include "data/run_snapshot.h"
#include "widgets/metric_chart.h"

class QCheckBox;
class QComboBox;
class QDialog;
class QDoubleSpinBox;
class QGridLayout;
class QGroupBox;
class QLabel;
class QVBoxLayout;

namespace ringmaster::ui {

class ChartsTab : public QWidget {
  Q_OBJECT

 public:
  explicit ChartsTab(int64_t run_id, QWidget* parent = nullptr);

  // Which ranks the charts show: every rank, one rank, or the min / median / max band.
  enum class RankMode { kEach, kBand, kOne };
  void showRanks(RankMode mode, int rank = 0);

  // The rank choice for a world of this size; on the first snapshot a large world is shown as a
  // band.
  void setWorldSize(int world_size, bool first_snapshot);
  // The ranks' groups by a mesh coordinate (data/rank_groups.h): where the charts show a band,
  // they show one per group; empty: one band of every rank.
  void setRankGroups(std::vector<RankGroup> groups) { rank_groups_ = std::move(groups); }
  // Shows the charts of a run of these facts (chartsFor); true when that changed which.
  bool setRunFacts(const ChartRunFacts& facts);
  // The step events' interval (telemetry.every_steps), which the step time's title states.
  void setStepsPerEvent(int64_t every);

  // The series the charts need, at their zoom, for a world of this size.
  void addRequests(SnapshotRequest& request, int world_size) const;
  // Draws a snapshot read with addRequests' request.
  void apply(const RunSnapshot& snapshot);

  // The charts shown, in chartsFor's order; chart() by the title as given (nullptr when none
  // shown has it).
  std::vector<MetricChart*> charts() const;
  MetricChart* chart(const QString& title) const;
  // The panel's group box ("" the default panel), and the panels shown, in order, by name.
  QGroupBox* panel(const std::string& name) const;
  std::vector<std::string> panelsShown() const;

  QStringList exportCharts(const QString& directory, const QStringList& formats);
  QDialog* openExportDialog();

 signals:
  // What is shown changed (ranks, zoom): the charts should be read again.
  void reloadWanted();
  void chartsExported(const QStringList& files, const QString& error);

 private:
  struct TableChart {
    ChartSpec spec;
    MetricChart* chart;
    double scale;  // recorded values to the chart's unit
  };
  struct Panel {
    QGroupBox* box;
    QGridLayout* grid;
  };
  QLayout* buildControls();
  TableChart& chartFor(const ChartSpec& spec);
  Panel& panelFor(const std::string& name);
  void layOutCharts(const std::vector<ChartSpec>& charts);
  void linkZoom(MetricChart* chart);
  std::vector<ChartLine> commByOpLines(const RunSnapshot& s) const;
  std::vector<ChartLine> metricLines(const TableChart& shown, const RunSnapshot& s,
                                     size_t& next) const;
  void updateChart(MetricChart* chart, std::vector<ChartLine> lines, bool ended);
  void showExported(const QStringList& written, const QString& dir);

  int64_t run_id_;
  ChartRunFacts facts_;
  RankMode rank_mode_ = RankMode::kEach;
  std::vector<RankGroup> rank_groups_;
  int one_rank_ = 0;
  QString export_dir_;                    // the folder of the last export
  std::deque<TableChart> table_;          // every chart made so far (a deque: stable addresses)
  std::vector<const TableChart*> shown_;  // those the run shows, in chartsFor's order
  std::map<std::string, Panel> panels_;   // by panel name, "" the default one
  std::vector<std::string> panels_shown_;
  QWidget* page_ = nullptr;  // the scrolled page of panels
  QVBoxLayout* page_layout_ = nullptr;
  QComboBox* rank_choice_ = nullptr;
  QDoubleSpinBox* smoothing_ = nullptr;  // every chart's smoothing weight
  QCheckBox* time_axis_ = nullptr;       // every chart's x axis in wall time
  QLabel* export_note_ = nullptr;
};

}  // namespace ringmaster::ui
