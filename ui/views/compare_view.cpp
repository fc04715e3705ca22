// CompareView: compareRuns for the tables, rank bands and per-rank series for the charts, read by
// one background job ("compare") and applied on the GUI thread.
#include "views/compare_view.h"

#include <QHeaderView>
#include <QLabel>
#include <QSplitter>
#include <QTableView>
#include <QVBoxLayout>
#include <map>

#include "data/background_jobs.h"
#include "db/database.h"
#include "models/compare_models.h"
#include "models/untrusted_text.h"
#include "query/series.h"
#include "views/table_copy.h"
#include "widgets/metric_chart.h"

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

// What one read brings back: the comparison and both charts' lines.
struct CompareData {
  storage::RunComparison comparison;
  std::vector<ChartLine> loss_lines, throughput_lines;
};

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
        CompareData data{storage::compareRuns(db, run_ids), {}, {}};
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
  loss_->setLines(loss_lines);
  throughput_->setLines(throughput_lines);

  summary_model_->setRuns(comparison.runs);
  std::vector<int64_t> ids;
  for (const storage::RunSummary& run : comparison.runs) ids.push_back(run.run.id);
  differences_model_->setDifferences(std::move(ids), comparison.differences);
}

}  // namespace ringmaster::ui
