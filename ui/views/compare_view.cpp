// CompareView: compareRuns for the tables, rank bands and per-rank series for the charts, the runs'
// metrics for the picker, read by one background job ("compare") and applied on the GUI thread.
#include "views/compare_view.h"

#include <QComboBox>
#include <QDateTime>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QSignalBlocker>
#include <QSplitter>
#include <QTableView>
#include <QTextDocument>
#include <QVBoxLayout>
#include <algorithm>
#include <map>

#include "charts/chart_table.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/compare_models.h"
#include "models/format.h"
#include "models/untrusted_text.h"
#include "query/compare_axes.h"
#include "query/run_report.h"
#include "query/runs.h"
#include "query/series.h"
#include "views/axis_picker.h"
#include "views/table_copy.h"
#include "widgets/metric_chart.h"
#include "widgets/scatter_chart.h"

namespace ringmaster::ui {

namespace {

QColor runColor(size_t i) {
  static const QColor palette[] = {{0x1f, 0x77, 0xb4}, {0xd6, 0x27, 0x28}, {0x2c, 0xa0, 0x2c},
                                   {0x94, 0x67, 0xbd}, {0xff, 0x7f, 0x0e}, {0x17, 0xbe, 0xcf}};
  return palette[i % std::size(palette)];
}

QTableView* makeTable(const QString& name, QAbstractItemModel* model) {
  auto* table = new QTableView();
  table->setObjectName(name);
  table->setModel(model);
  table->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table->setAlternatingRowColors(true);
  table->horizontalHeader()->setSectionResizeMode(QHeaderView::Stretch);
  table->verticalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  enableCsvCopy(table);
  return table;
}

// A run's band of `metric`: the median of ranks with its min / max envelope.
ChartLine medianLine(const storage::Band& band, const QString& name, QColor color) {
  ChartLine line{name, color, {}, {}, {}};
  line.steps_per_point = band.bucket_width;
  line.centre_label = "median of ranks";
  for (const auto& b : band.buckets) {
    const double x = static_cast<double>(b.start) + band.bucket_width / 2.0;
    line.centre.append({x, b.median});
    if (band.bucket_width > 1) {
      line.low.append({x, b.min});
      line.high.append({x, b.max});
    }
  }
  return line;
}

// Throughput per bucket: every rank's samples over its step time, summed over ranks.
ChartLine throughputLine(const storage::Database& db, const storage::RunRecord& run,
                         const storage::SeriesRange& range, const QString& name, QColor color,
                         const JobToken& token) {
  std::map<int64_t, double> per_bucket;
  int64_t width = 1;
  for (int r = 0; r < run.world_size && !token.cancelled(); ++r) {
    const storage::Series samples = storage::loadSeries(db, run.id, "samples", r, range);
    const storage::Series step_ms = storage::loadSeries(db, run.id, "step_ms", r, range);
    width = std::max(width, samples.bucket_width);
    std::map<int64_t, double> ms;
    for (const auto& b : step_ms.buckets) ms[b.start] = b.summary.mean();
    for (const auto& b : samples.buckets)
      if (auto it = ms.find(b.start); it != ms.end() && it->second > 0)
        per_bucket[b.start] += b.summary.mean() / (it->second / 1000.0);
  }
  ChartLine throughput{name, color, {}, {}, {}};
  throughput.steps_per_point = width;
  for (const auto& [start, value] : per_bucket)
    throughput.centre.append({static_cast<double>(start) + width / 2.0, value});
  return throughput;
}

storage::SeriesRange rangeOf(const MetricChart* chart) {
  storage::SeriesRange r;
  r.buckets = chart->bucketsWanted();
  if (chart->zoomed()) {
    r.from_step = chart->zoomRange().first;
    r.to_step = chart->zoomRange().second;
  }
  return r;
}

// The runs whose spec lacks the colour field.
const QColor kNoGroup(0x99, 0x99, 0x99);

}  // namespace

// What one read brings back: the comparison, the charts' lines, what the picker offers and the
// runs' reports (the scatter's axes).
struct CompareView::Read {
  storage::RunComparison comparison;
  std::vector<nlohmann::json> reports;
  std::vector<ChartLine> loss_lines, throughput_lines, metric_lines;
  std::vector<std::string> metrics;  // comparableMetrics of the runs
  std::string metric;                // the one metric_lines draw
};

CompareView::CompareView(const std::string& db_path, std::vector<int64_t> run_ids, QWidget* parent)
    : QWidget(parent), db_path_(db_path), run_ids_(std::move(run_ids)) {
  jobs_ = new BackgroundJobs(this);
  auto* layout = new QVBoxLayout(this);
  error_ = new QLabel();
  error_->setObjectName("compareError");
  error_->setWordWrap(true);
  error_->hide();
  layout->addWidget(error_);
  auto* splitter = new QSplitter(Qt::Vertical);
  auto* charts = new QSplitter(Qt::Horizontal);
  loss_ = new MetricChart("Loss (median of ranks)", "loss");
  loss_->setObjectName("compareLoss");
  throughput_ = new MetricChart("Throughput (all ranks)", "samples/s");
  throughput_->setObjectName("compareThroughput");
  // Any metric of the runs, picked by name.
  auto* metric_box = new QWidget();
  auto* metric_layout = new QVBoxLayout(metric_box);
  metric_layout->setContentsMargins(0, 0, 0, 0);
  auto* picker = new QHBoxLayout();
  picker->addWidget(new QLabel("Metric:"));
  metric_choice_ = new QComboBox();
  metric_choice_->setObjectName("compareMetric");
  metric_choice_->setToolTip("Every metric the compared runs recorded");
  picker->addWidget(metric_choice_, 1);
  metric_layout->addLayout(picker);
  metric_chart_ = new MetricChart("Metric", "");
  metric_chart_->setObjectName("compareMetricChart");
  metric_layout->addWidget(metric_chart_, 1);
  connect(metric_choice_, &QComboBox::activated, this,
          [this](int index) { showMetric(metric_choice_->itemData(index).toString()); });
  // Two rows of two, so that the view fits a laptop's screen (issue 33: 1366 px wide).
  auto* lower_charts = new QSplitter(Qt::Horizontal);
  charts->addWidget(loss_);
  charts->addWidget(throughput_);
  lower_charts->addWidget(metric_box);
  lower_charts->addWidget(makeScatterBox());
  splitter->addWidget(charts);
  splitter->addWidget(lower_charts);
  auto* tables = new QSplitter(Qt::Horizontal);
  summary_model_ = new CompareSummaryModel(this);
  differences_model_ = new SpecDifferencesModel(this);
  summary_ = makeTable("compareSummary", summary_model_);
  differences_ = makeTable("compareDifferences", differences_model_);
  auto* summary_box = new QWidget();
  auto* summary_layout = new QVBoxLayout(summary_box);
  summary_layout->setContentsMargins(0, 0, 0, 0);
  summary_layout->addWidget(new QLabel("<b>Summary</b>"));
  summary_layout->addWidget(summary_);
  auto* diff_box = new QWidget();
  auto* diff_layout = new QVBoxLayout(diff_box);
  diff_layout->setContentsMargins(0, 0, 0, 0);
  diff_layout->addWidget(new QLabel("<b>Spec differences</b>"));
  diff_layout->addWidget(differences_);
  tables->addWidget(summary_box);
  tables->addWidget(diff_box);
  splitter->addWidget(tables);
  layout->addWidget(splitter);
  linkZoom();
  reload();
}

// Zoom is linked, as in a run view: the other charts follow and all re-read the range.
void CompareView::linkZoom() {
  const std::vector<MetricChart*> charts = {loss_, throughput_, metric_chart_};
  for (MetricChart* chart : charts) {
    connect(chart, &MetricChart::rangeChanged, this, [this, chart, charts] {
      for (MetricChart* other : charts) {
        if (other == chart) continue;
        if (chart->zoomed())
          other->setZoomRange(chart->zoomRange().first, chart->zoomRange().second);
        else
          other->clearZoom();
      }
      reload();
    });
  }
}

void CompareView::showMetric(const QString& metric) {
  metric_ = metric.toStdString();
  reload();
}

QString CompareView::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

void CompareView::reload() {
  const storage::SeriesRange loss_range = rangeOf(loss_), throughput_range = rangeOf(throughput_),
                             metric_range = rangeOf(metric_chart_);
  jobs_->run<Read>(
      "compare",
      [path = db_path_, run_ids = run_ids_, loss_range, throughput_range, metric_range,
       metric = metric_](const JobToken& token) -> Read {
        storage::Database db(path, storage::readingOptions(path));
        Read data{.comparison = storage::compareRuns(db, run_ids)};
        const std::vector<storage::RunSummary>& runs = data.comparison.runs;
        const double now = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000;
        for (int64_t id : run_ids)
          data.reports.push_back(storage::toJson(storage::buildRunReport(db, id, now)));
        std::vector<std::vector<std::string>> per_run;
        for (const storage::RunSummary& run : runs)
          per_run.push_back(storage::metricNames(db, run.run.id));
        data.metrics = comparableMetrics(per_run);
        // The gradient norm until another is picked, or the runs' first metric.
        data.metric = metric;
        if (data.metric.empty() && !data.metrics.empty())
          data.metric =
              std::find(data.metrics.begin(), data.metrics.end(), "grad_norm") != data.metrics.end()
                  ? "grad_norm"
                  : data.metrics.front();
        for (size_t i = 0; i < runs.size() && !token.cancelled(); ++i) {
          const storage::RunRecord& run = runs[i].run;
          const QString name = QString("run %1 %2").arg(run.id).arg(untrustedLine(run.name));
          data.loss_lines.push_back(
              medianLine(storage::loadRankBand(db, run.id, "loss", loss_range), name, runColor(i)));
          data.throughput_lines.push_back(
              throughputLine(db, run, throughput_range, name, runColor(i), token));
          if (!data.metric.empty())
            data.metric_lines.push_back(medianLine(
                storage::loadRankBand(db, run.id, data.metric, metric_range), name, runColor(i)));
        }
        return data;
      },
      [this](Read data) {
        error_->hide();
        applyComparison(std::move(data));
      },
      [this](const QString& error) {
        error_->setText("Cannot compare: " + error);
        error_->show();
      });
}

void CompareView::applyComparison(Read read) {
  reports_ = std::move(read.reports);
  loss_lines_ = std::move(read.loss_lines);
  throughput_lines_ = std::move(read.throughput_lines);
  metric_lines_ = std::move(read.metric_lines);
  fillPickers();
  redrawScatter();
  metric_ = read.metric;
  metric_choice_->clear();
  for (const std::string& metric : read.metrics)
    metric_choice_->addItem(untrustedLine(metric), QString::fromStdString(metric));
  metric_choice_->setCurrentIndex(metric_choice_->findData(QString::fromStdString(metric_)));
  metric_chart_->setTitleNote(
      QString(": %1 (median of ranks)").arg(untrustedLine(metricTitle(metric_))));

  summary_model_->setRuns(read.comparison.runs);
  std::vector<int64_t> ids;
  for (const storage::RunSummary& run : read.comparison.runs) ids.push_back(run.run.id);
  differences_model_->setDifferences(std::move(ids), read.comparison.differences);
}

QWidget* CompareView::makeScatterBox() {
  auto* box = new QWidget();
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* pickers = new QHBoxLayout();
  const auto picker = [&](const QString& name, const QString& label) {
    QComboBox* combo = addAxisPicker(pickers, name, label);
    connect(combo, &QComboBox::currentIndexChanged, this, [this] { redrawScatter(); });
    return combo;
  };
  x_picker_ = picker("compareX", "X");
  y_picker_ = picker("compareY", "Y");
  colour_picker_ = picker("compareColourBy", "Colour by");
  layout->addLayout(pickers);
  scatter_ = new ScatterChart();
  scatter_->setObjectName("compareScatter");
  layout->addWidget(scatter_, 1);
  legend_ = new QLabel();
  legend_->setObjectName("compareLegend");
  legend_->setTextFormat(Qt::RichText);  // its untrusted parts are escaped
  legend_->setWordWrap(true);
  layout->addWidget(legend_);
  return box;
}

void CompareView::fillPickers() {
  const storage::AxisChoices choices = storage::axisChoices(reports_);
  const auto fill = [&](QComboBox* combo, bool figures, const QString& first_text,
                        const QString& fallback) {
    const QString picked = combo->count() > 0 ? combo->currentData().toString() : fallback;
    const QSignalBlocker quiet(combo);
    combo->clear();
    if (!first_text.isEmpty()) combo->addItem(first_text, QString());
    if (figures)
      for (const std::string& id : choices.figures)
        combo->addItem(figureHeading(id), QString::fromStdString(id));
    for (size_t i = 0; i < choices.spec_fields.size(); ++i) {
      const QString path = untrustedLine(choices.spec_fields[i]);
      combo->addItem(i < choices.differing_fields ? path + " (differs)" : path, path);
    }
    const int at = combo->findData(picked);
    combo->setCurrentIndex(std::max(at, 0));
  };
  const QString first_field = choices.differing_fields > 0
                                  ? QString::fromStdString(choices.spec_fields.front())
                                  : QString("final_step");
  fill(x_picker_, true, {}, first_field);
  fill(y_picker_, true, {}, "final_loss");
  fill(colour_picker_, false, "each run its own colour", QString());
}

std::vector<QColor> CompareView::runColours() const {
  std::vector<QColor> colours;
  const QString field = colour_picker_->currentData().toString();
  if (field.isEmpty() || reports_.empty()) {
    for (size_t i = 0; i < std::max(reports_.size(), loss_lines_.size()); ++i)
      colours.push_back(runColor(i));
    return colours;
  }
  const storage::ComparisonAxis groups = storage::comparisonAxis(reports_, field.toStdString());
  for (const storage::AxisPoint& point : groups.points)
    colours.push_back(point.category < 0 ? kNoGroup
                                         : runColor(static_cast<size_t>(point.category)));
  return colours;
}

void CompareView::redrawScatter() {
  if (reports_.empty() || x_picker_->count() == 0) return;
  const std::vector<QColor> colours = runColours();
  // The charts' lines in the same colours: runs of one group share one.
  for (std::vector<ChartLine>* lines : {&loss_lines_, &throughput_lines_, &metric_lines_})
    for (size_t i = 0; i < lines->size() && i < colours.size(); ++i) (*lines)[i].color = colours[i];
  loss_->setLines(loss_lines_);
  throughput_->setLines(throughput_lines_);
  metric_chart_->setLines(metric_lines_);
  std::vector<int64_t> ids;
  for (const nlohmann::json& report : reports_) ids.push_back(report["run"]["id"].get<int64_t>());
  scatter_->setPoints(
      storage::comparisonAxis(reports_, x_picker_->currentData().toString().toStdString()),
      storage::comparisonAxis(reports_, y_picker_->currentData().toString().toStdString()), ids,
      colours);
  // The legend: a swatch per group (per run when nothing colours them), with its runs' count.
  QStringList items;
  const QString field = colour_picker_->currentData().toString();
  const auto swatch = [](const QColor& colour, const QString& text) {
    return QString("<span style=\"color:%1\">&#9632;</span>&nbsp;%2").arg(colour.name(), text);
  };
  if (field.isEmpty()) {
    for (size_t i = 0; i < ids.size(); ++i)
      items << swatch(colours[i], QString("run %1").arg(ids[i]));
  } else {
    const storage::ComparisonAxis groups = storage::comparisonAxis(reports_, field.toStdString());
    for (size_t k = 0; k < groups.categories.size(); ++k) {
      const auto count = std::count_if(groups.points.begin(), groups.points.end(),
                                       [&](const auto& p) { return p.category == int(k); });
      items << swatch(runColor(k), QString("%1 = %2 (%3)")
                                       .arg(untrustedLine(groups.key).toHtmlEscaped(),
                                            untrustedLine(groups.categories[k]).toHtmlEscaped())
                                       .arg(count));
    }
    const auto none = std::count_if(groups.points.begin(), groups.points.end(),
                                    [](const auto& p) { return p.category < 0; });
    if (none > 0)
      items << swatch(
          kNoGroup, QString("no %1 (%2)").arg(untrustedLine(groups.key).toHtmlEscaped()).arg(none));
  }
  legend_->setText(items.join("&nbsp;&nbsp; "));
}

QString CompareView::legendText() const {
  QTextDocument document;
  document.setHtml(legend_->text());
  return document.toPlainText();
}

}  // namespace ringmaster::ui
