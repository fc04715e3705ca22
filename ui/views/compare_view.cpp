// CompareView: compareRuns for the tables, rank bands and per-rank series for the charts, read by
// one background job ("compare") and applied on the GUI thread.
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
#include <map>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/compare_models.h"
#include "models/format.h"
#include "models/untrusted_text.h"
#include "query/compare_axes.h"
#include "query/run_report.h"
#include "query/series.h"
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

// What one read brings back: the comparison, both charts' lines and the runs' reports.
struct CompareData {
  storage::RunComparison comparison;
  std::vector<ChartLine> loss_lines, throughput_lines;
  std::vector<nlohmann::json> reports;
};

// The runs whose spec lacks the colour field.
const QColor kNoGroup(0x99, 0x99, 0x99);

}  // namespace

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
  charts->addWidget(loss_);
  charts->addWidget(throughput_);
  charts->addWidget(makeScatterBox());
  splitter->addWidget(charts);
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
  // Zoom is linked, as in a run view: the other chart follows and both re-read the range.
  for (auto [chart, other] : {std::pair{loss_, throughput_}, std::pair{throughput_, loss_}}) {
    connect(chart, &MetricChart::rangeChanged, this, [this, chart, other] {
      if (chart->zoomed())
        other->setZoomRange(chart->zoomRange().first, chart->zoomRange().second);
      else
        other->clearZoom();
      reload();
    });
  }
  reload();
}

QString CompareView::errorText() const {
  return error_->isHidden() ? QString() : error_->text();
}

void CompareView::reload() {
  auto range = [](const MetricChart* chart) {
    storage::SeriesRange r;
    r.buckets = chart->bucketsWanted();
    if (chart->zoomed()) {
      r.from_step = chart->zoomRange().first;
      r.to_step = chart->zoomRange().second;
    }
    return r;
  };
  const storage::SeriesRange loss_range = range(loss_), throughput_range = range(throughput_);
  jobs_->run<CompareData>(
      "compare",
      [path = db_path_, run_ids = run_ids_, loss_range,
       throughput_range](const JobToken& token) -> CompareData {
        storage::Database db(path, storage::readingOptions(path));
        CompareData data{storage::compareRuns(db, run_ids), {}, {}, {}};
        const double now = static_cast<double>(QDateTime::currentMSecsSinceEpoch()) / 1000;
        for (int64_t id : run_ids)
          data.reports.push_back(storage::toJson(storage::buildRunReport(db, id, now)));
        const storage::RunComparison& comparison = data.comparison;
        for (size_t i = 0; i < comparison.runs.size() && !token.cancelled(); ++i) {
          const storage::RunRecord& run = comparison.runs[i].run;
          const QString name = QString("run %1 %2").arg(run.id).arg(untrustedLine(run.name));
          const storage::Band band = storage::loadRankBand(db, run.id, "loss", loss_range);
          ChartLine loss{name, runColor(i), {}, {}, {}};
          loss.steps_per_point = band.bucket_width;
          loss.centre_label = "median of ranks";
          for (const auto& b : band.buckets) {
            const double x = static_cast<double>(b.start) + band.bucket_width / 2.0;
            loss.centre.append({x, b.median});
            if (band.bucket_width > 1) {
              loss.low.append({x, b.min});
              loss.high.append({x, b.max});
            }
          }
          data.loss_lines.push_back(std::move(loss));
          // Throughput per bucket: every rank's samples over its step time, summed over ranks.
          std::map<int64_t, double> per_bucket;
          int64_t width = 1;
          for (int r = 0; r < run.world_size && !token.cancelled(); ++r) {
            const storage::Series samples =
                storage::loadSeries(db, run.id, "samples", r, throughput_range);
            const storage::Series step_ms =
                storage::loadSeries(db, run.id, "step_ms", r, throughput_range);
            width = std::max(width, samples.bucket_width);
            std::map<int64_t, double> ms;
            for (const auto& b : step_ms.buckets) ms[b.start] = b.summary.mean();
            for (const auto& b : samples.buckets)
              if (auto it = ms.find(b.start); it != ms.end() && it->second > 0)
                per_bucket[b.start] += b.summary.mean() / (it->second / 1000.0);
          }
          ChartLine throughput{name, runColor(i), {}, {}, {}};
          throughput.steps_per_point = width;
          for (const auto& [start, value] : per_bucket)
            throughput.centre.append({static_cast<double>(start) + width / 2.0, value});
          data.throughput_lines.push_back(std::move(throughput));
        }
        return data;
      },
      [this](CompareData data) {
        error_->hide();
        reports_ = std::move(data.reports);
        applyComparison(data.comparison, data.loss_lines, data.throughput_lines);
      },
      [this](const QString& error) {
        error_->setText("Cannot compare: " + error);
        error_->show();
      });
}

void CompareView::applyComparison(const storage::RunComparison& comparison,
                                  const std::vector<ChartLine>& loss_lines,
                                  const std::vector<ChartLine>& throughput_lines) {
  loss_lines_ = loss_lines;
  throughput_lines_ = throughput_lines;
  fillPickers();
  redrawScatter();

  summary_model_->setRuns(comparison.runs);
  std::vector<int64_t> ids;
  for (const storage::RunSummary& run : comparison.runs) ids.push_back(run.run.id);
  differences_model_->setDifferences(std::move(ids), comparison.differences);
}

QWidget* CompareView::makeScatterBox() {
  auto* box = new QWidget();
  auto* layout = new QVBoxLayout(box);
  layout->setContentsMargins(0, 0, 0, 0);
  auto* pickers = new QHBoxLayout();
  const auto picker = [&](const QString& name, const QString& label) {
    auto* combo = new QComboBox();
    combo->setObjectName(name);
    combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
    combo->setMinimumContentsLength(10);
    pickers->addWidget(new QLabel(label));
    pickers->addWidget(combo, 1);
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
  for (std::vector<ChartLine>* lines : {&loss_lines_, &throughput_lines_})
    for (size_t i = 0; i < lines->size() && i < colours.size(); ++i) (*lines)[i].color = colours[i];
  loss_->setLines(loss_lines_);
  throughput_->setLines(throughput_lines_);
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
