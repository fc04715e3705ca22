// The layout advisor's answer in the job editor (issue 37): `ringmaster plan --json`'s document
// (docs/layout_advisor.md) read into plain rows, the table model of the valid layouts (sortable,
// the top K marked) and the model of the trials' predicted against measured terms. Reading only:
// the plan is made and the trials run by the `ringmaster plan` command (views/job/plan_view.h).
#pragma once

#include <QAbstractTableModel>
#include <QString>
#include <cstdint>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

namespace ringmaster::ui {

// One layout of the plan: its choices, memory, and (valid ones) its predicted step.
struct PlanLayoutRow {
  int rank = 0;  // 1 for the best predicted; 0 for a layout dropped for memory
  bool top = false;
  QString label;
  int dp = 1, tp = 1, pp = 1;
  QString dp_mode, schedule;  // schedule "" without a pipeline; "interleaved_1f1bx2" with chunks
  int micro_batches = 1;
  bool checkpointing = false;
  QString precision;
  double memory_bytes = 0;
  QString dropped;  // why (memory); "" for a valid layout
  // The prediction, ms (none for a dropped layout); comm per mesh dimension where it has one.
  std::optional<double> step_ms, compute_ms, bubble_ms, comm_dp_ms, comm_tp_ms, comm_pp_ms;
  std::optional<double> rate;
  QString rate_unit;
  nlohmann::json overrides = nlohmann::json::object();  // dotted field -> JSON value
};

// One term of one trial, predicted against measured.
struct TrialTermRow {
  int position = 0;  // the layout's place in the prediction (0: the best)
  QString label, status;
  std::optional<int64_t> run;
  QString term;  // "step", "compute", "bubble", "comm dp", ...
  double predicted_ms = 0;
  std::optional<double> measured_ms, ratio;
};

struct TrialsSummary {
  std::vector<TrialTermRow> terms;  // trial by trial, each's terms in order
  // Per trial (member order): its measured rate where it completed with one.
  struct Trial {
    int position = 0;
    QString label, status;
    std::optional<int64_t> run;
    double predicted_rate = 0;
    std::optional<double> measured_rate;
  };
  std::vector<Trial> trials;
  std::optional<double> rank_correlation;
  QString furthest_term;  // "" when none
  std::optional<double> furthest_ratio;
};

struct PlanResult {
  int world = 0;
  std::vector<PlanLayoutRow> layouts;  // the valid ones, best predicted first
  std::vector<PlanLayoutRow> dropped;  // over the device memory, with why
  std::vector<QString> refused;        // "label: problem" for each the spec validation refused
  std::optional<TrialsSummary> trials;
};

// Reads `ringmaster plan --json`'s document; throws nlohmann::json::exception on another shape.
PlanResult parsePlanJson(const nlohmann::json& document);
// The layout "Launch best" runs: the trials' fastest measured (completed) where trials ran, else
// the best predicted; nullptr when the plan has no valid layout.
const PlanLayoutRow* winnerOf(const PlanResult& plan);
// "dp2 x tp1 x pp1" as the table shows a mesh.
QString meshText(const PlanLayoutRow& row);

// The valid layouts, one row each, in the plan's order; every column sorts by its value
// (kSortRole), a missing value last. The top K's rank is starred and bold.
class PlanLayoutModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kRank,
    kMesh,
    kDpMode,
    kSchedule,
    kMicroBatches,
    kCheckpointing,
    kPrecision,
    kMemory,
    kStep,
    kCompute,
    kBubble,
    kCommDp,
    kCommTp,
    kCommPp,
    kRate,
    kColumnCount
  };
  static constexpr int kSortRole = Qt::UserRole + 1;
  // The row's index in layouts() (whatever the sort).
  static constexpr int kLayoutRole = Qt::UserRole + 2;

  using QAbstractTableModel::QAbstractTableModel;
  void setLayouts(std::vector<PlanLayoutRow> layouts);
  const std::vector<PlanLayoutRow>& layouts() const { return layouts_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<PlanLayoutRow> layouts_;
};

// The trials' terms: a row per trial and term (predicted, measured, measured / predicted).
class TrialTermsModel : public QAbstractTableModel {
  Q_OBJECT

 public:
  enum Column {
    kTrial,
    kLayout,
    kStatus,
    kRun,
    kTerm,
    kPredicted,
    kMeasured,
    kRatio,
    kColumnCount
  };
  using QAbstractTableModel::QAbstractTableModel;
  void setTerms(std::vector<TrialTermRow> terms);
  const std::vector<TrialTermRow>& terms() const { return terms_; }

  int rowCount(const QModelIndex& parent = {}) const override;
  int columnCount(const QModelIndex& parent = {}) const override;
  QVariant data(const QModelIndex& index, int role) const override;
  QVariant headerData(int section, Qt::Orientation orientation, int role) const override;

 private:
  std::vector<TrialTermRow> terms_;
};

}  // namespace ringmaster::ui
