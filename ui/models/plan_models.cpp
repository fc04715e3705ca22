// The plan's JSON read into rows, and the layouts' and trials' table models.
#include "models/plan_models.h"

#include <QFont>

#include "models/format.h"

namespace ringmaster::ui {

namespace {

using nlohmann::json;

std::optional<double> optionalNumber(const json& value) {
  if (value.is_number()) return value.get<double>();
  return std::nullopt;
}

QString text(const json& value) {
  return value.is_string() ? QString::fromStdString(value.get<std::string>()) : QString();
}

PlanLayoutRow layoutRow(const json& entry) {
  PlanLayoutRow row;
  row.rank = entry.at("rank").is_number() ? entry.at("rank").get<int>() : 0;
  row.top = entry.value("top", false);
  row.label = text(entry.at("label"));
  row.dp = entry.at("mesh").at("dp").get<int>();
  row.tp = entry.at("mesh").at("tp").get<int>();
  row.pp = entry.at("mesh").at("pp").get<int>();
  row.dp_mode = text(entry.at("dp_mode"));
  row.schedule = text(entry.at("schedule"));
  const int chunks = entry.value("virtual_stages", 1);
  if (!row.schedule.isEmpty() && chunks > 1) row.schedule += QString("x%1").arg(chunks);
  row.micro_batches = entry.value("micro_batches", 1);
  row.checkpointing = entry.value("checkpointing", false);
  row.precision = text(entry.at("precision"));
  row.memory_bytes = entry.value("memory_bytes", 0.0);
  row.dropped = text(entry.at("dropped"));
  row.overrides = entry.at("overrides");
  const json& prediction = entry.at("prediction");
  if (!prediction.is_object()) return row;
  row.step_ms = prediction.at("step_ms").get<double>();
  row.compute_ms = prediction.at("compute_ms").get<double>();
  row.bubble_ms = prediction.at("bubble_ms").get<double>();
  for (const json& comm : prediction.at("comm")) {
    const std::string dim = comm.at("dim").get<std::string>();
    std::optional<double>& slot = dim == "dp"   ? row.comm_dp_ms
                                  : dim == "tp" ? row.comm_tp_ms
                                                : row.comm_pp_ms;
    slot = slot.value_or(0) + comm.at("ms").get<double>();
  }
  row.rate = prediction.at("rate").get<double>();
  row.rate_unit = text(prediction.at("rate_unit"));
  return row;
}

TrialsSummary trialsSummary(const json& trials) {
  TrialsSummary summary;
  for (const json& trial : trials.at("trials")) {
    TrialsSummary::Trial each{.position = trial.at("position").get<int>(),
                              .label = text(trial.at("label")),
                              .status = text(trial.at("status")),
                              .run = trial.at("run").is_number()
                                         ? std::optional(trial.at("run").get<int64_t>())
                                         : std::nullopt,
                              .predicted_rate = trial.at("predicted_rate").get<double>(),
                              .measured_rate = optionalNumber(trial.at("measured_rate"))};
    for (const json& term : trial.at("terms")) {
      summary.terms.push_back({.position = each.position,
                               .label = each.label,
                               .status = each.status,
                               .run = each.run,
                               .term = text(term.at("term")),
                               .predicted_ms = term.at("predicted_ms").get<double>(),
                               .measured_ms = optionalNumber(term.at("measured_ms")),
                               .ratio = optionalNumber(term.at("ratio"))});
    }
    summary.trials.push_back(std::move(each));
  }
  summary.rank_correlation = optionalNumber(trials.at("rank_correlation"));
  summary.furthest_term = text(trials.at("furthest_term"));
  summary.furthest_ratio = optionalNumber(trials.at("furthest_ratio"));
  return summary;
}

QVariant optionalMs(const std::optional<double>& ms) {
  return ms ? QVariant(formatMs(*ms)) : QVariant(QString("-"));
}

// Sorts missing values after every number, ascending or descending alike being close enough:
// a missing value sorts as +infinity.
QVariant sortValue(const std::optional<double>& value) {
  return value ? *value : std::numeric_limits<double>::infinity();
}

}  // namespace

PlanResult parsePlanJson(const json& document) {
  PlanResult plan;
  plan.world = document.at("world").get<int>();
  for (const json& entry : document.at("layouts")) {
    PlanLayoutRow row = layoutRow(entry);
    (row.rank > 0 ? plan.layouts : plan.dropped).push_back(std::move(row));
  }
  for (const json& refused : document.at("refused"))
    plan.refused.push_back(text(refused.at("label")) + ": " + text(refused.at("problem")));
  if (document.contains("trials")) plan.trials = trialsSummary(document.at("trials"));
  return plan;
}

const PlanLayoutRow* winnerOf(const PlanResult& plan) {
  if (plan.layouts.empty()) return nullptr;
  const TrialsSummary::Trial* fastest = nullptr;
  if (plan.trials) {
    for (const TrialsSummary::Trial& trial : plan.trials->trials) {
      if (trial.status != "completed" || !trial.measured_rate) continue;
      if (trial.position < 0 || size_t(trial.position) >= plan.layouts.size()) continue;
      if (!fastest || *trial.measured_rate > *fastest->measured_rate) fastest = &trial;
    }
  }
  return &plan.layouts[fastest ? size_t(fastest->position) : 0];
}

QString meshText(const PlanLayoutRow& row) {
  return QString("%1 x %2 x %3").arg(row.dp).arg(row.tp).arg(row.pp);
}

// ---------------------------------------------------------------- the layouts

void PlanLayoutModel::setLayouts(std::vector<PlanLayoutRow> layouts) {
  beginResetModel();
  layouts_ = std::move(layouts);
  endResetModel();
}

int PlanLayoutModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(layouts_.size());
}

int PlanLayoutModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant PlanLayoutModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || size_t(index.row()) >= layouts_.size()) return {};
  const PlanLayoutRow& row = layouts_[size_t(index.row())];
  if (role == kLayoutRole) return index.row();
  if (role == Qt::FontRole && row.top) {
    QFont bold;
    bold.setBold(true);
    return bold;
  }
  if (role == Qt::ToolTipRole) {
    return QString("%1\n%2").arg(
        row.label, row.top ? "one of the top K: trials run these" : "not in the top K");
  }
  if (role == Qt::TextAlignmentRole && index.column() >= kMicroBatches)
    return int(Qt::AlignRight | Qt::AlignVCenter);
  const bool sort = role == kSortRole;
  if (!sort && role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kRank:
      return sort ? QVariant(row.rank)
                  : QVariant(QString("%1%2").arg(row.top ? "* " : "").arg(row.rank));
    case kMesh:
      return sort ? QVariant(row.dp * 10000 + row.tp * 100 + row.pp) : QVariant(meshText(row));
    case kDpMode:
      return row.dp_mode;
    case kSchedule:
      return row.schedule.isEmpty() && !sort ? QString("-") : row.schedule;
    case kMicroBatches:
      return row.micro_batches;
    case kCheckpointing:
      return sort ? QVariant(row.checkpointing) : QVariant(row.checkpointing ? "on" : "off");
    case kPrecision:
      return row.precision;
    case kMemory:
      return sort ? QVariant(row.memory_bytes) : QVariant(formatBytes(row.memory_bytes));
    case kStep:
      return sort ? sortValue(row.step_ms) : optionalMs(row.step_ms);
    case kCompute:
      return sort ? sortValue(row.compute_ms) : optionalMs(row.compute_ms);
    case kBubble:
      return sort ? sortValue(row.bubble_ms) : optionalMs(row.bubble_ms);
    case kCommDp:
      return sort ? sortValue(row.comm_dp_ms) : optionalMs(row.comm_dp_ms);
    case kCommTp:
      return sort ? sortValue(row.comm_tp_ms) : optionalMs(row.comm_tp_ms);
    case kCommPp:
      return sort ? sortValue(row.comm_pp_ms) : optionalMs(row.comm_pp_ms);
    case kRate:
      if (sort) return sortValue(row.rate);
      return row.rate ? QVariant(QString("%1 %2").arg(formatFigure(*row.rate), row.rate_unit))
                      : QVariant(QString("-"));
    default:
      return {};
  }
}

QVariant PlanLayoutModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kHeadings[kColumnCount] = {
      "Rank",   "Mesh dp x tp x pp", "DP mode", "Schedule", "Micro-batches",
      "Ckpt",   "Precision",         "Memory",  "Step",     "Compute",
      "Bubble", "Comm dp",           "Comm tp", "Comm pp",  "Predicted rate"};
  return section >= 0 && section < kColumnCount ? QString(kHeadings[section]) : QVariant();
}

// ---------------------------------------------------------------- the trials

void TrialTermsModel::setTerms(std::vector<TrialTermRow> terms) {
  beginResetModel();
  terms_ = std::move(terms);
  endResetModel();
}

int TrialTermsModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(terms_.size());
}

int TrialTermsModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : kColumnCount;
}

QVariant TrialTermsModel::data(const QModelIndex& index, int role) const {
  if (!index.isValid() || size_t(index.row()) >= terms_.size()) return {};
  if (role == Qt::TextAlignmentRole && index.column() >= kPredicted)
    return int(Qt::AlignRight | Qt::AlignVCenter);
  if (role != Qt::DisplayRole) return {};
  const TrialTermRow& row = terms_[size_t(index.row())];
  switch (index.column()) {
    case kTrial:
      return row.position + 1;
    case kLayout:
      return row.label;
    case kStatus:
      return row.status;
    case kRun:
      return row.run ? QVariant(qlonglong(*row.run)) : QVariant(QString("-"));
    case kTerm:
      return row.term;
    case kPredicted:
      return formatMs(row.predicted_ms);
    case kMeasured:
      return optionalMs(row.measured_ms);
    case kRatio:
      return row.ratio ? QVariant(QString("x%1").arg(*row.ratio, 0, 'f', 2)) : QVariant("-");
    default:
      return {};
  }
}

QVariant TrialTermsModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || role != Qt::DisplayRole) return {};
  static const char* const kHeadings[kColumnCount] = {
      "Trial", "Layout", "Status", "Run", "Term", "Predicted", "Measured", "Measured / predicted"};
  return section >= 0 && section < kColumnCount ? QString(kHeadings[section]) : QVariant();
}

}  // namespace ringmaster::ui
