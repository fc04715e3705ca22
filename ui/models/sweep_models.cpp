// SweepListModel, SweepMembersModel and SweepDifferencesModel: untrusted text escaped, figures
// through format.h by their kind.
#include "models/sweep_models.h"

#include <QColor>
#include <QDateTime>
#include <QFont>
#include <QStringList>
#include <algorithm>
#include <cmath>

#include "models/format.h"
#include "models/run_list_model.h"
#include "models/untrusted_text.h"
#include "query/figures.h"

namespace ringmaster::ui {

namespace {

using nlohmann::json;

// A spec value as written: text as itself, anything else as JSON.
std::string valueText(const json& value) {
  if (value.is_null()) return "";
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// The best run's row, and a refused member's state, stand out.
const QColor kBestBackground(0xdc, 0xfc, 0xe7);
const QColor kRefused(0xd6, 0x27, 0x28);

// The fixed columns around the swept fields and the figures.
const QString kPosition = "position", kState = "state", kRun = "run", kStatus = "status",
              kError = "error";

}  // namespace

// ---- The sweeps of a database ---------------------------------------------------------------

void SweepListModel::setSweeps(std::vector<storage::SweepRecord> sweeps) {
  bool same = sweeps.size() == rows().size();
  for (size_t i = 0; same && i < sweeps.size(); ++i) same = sweeps[i].id == rows()[i].id;
  replaceRows(std::move(sweeps), same);
}

int SweepListModel::rowOfSweep(int64_t sweep_id) const {
  for (size_t i = 0; i < rows().size(); ++i)
    if (rows()[i].id == sweep_id) return static_cast<int>(i);
  return -1;
}

std::vector<std::string> sweptFields(const std::string& plan_json) {
  const json plan = json::parse(plan_json, nullptr, /*allow_exceptions=*/false);
  std::vector<std::string> fields;
  if (!plan.is_object() || !plan.contains("axes") || !plan["axes"].is_array()) return fields;
  for (const json& axis : plan["axes"])
    if (axis.is_object() && axis.contains("field") && axis["field"].is_string())
      fields.push_back(axis["field"].get<std::string>());
  return fields;
}

QVariant SweepListModel::data(const QModelIndex& index, int role) const {
  const storage::SweepRecord* found = rowAt(index);
  if (!found) return {};
  const storage::SweepRecord& sweep = *found;
  if (role == kSweepIdRole) return QVariant::fromValue<qlonglong>(sweep.id);
  if (role == Qt::ForegroundRole && index.column() == kStatus) return statusColor(sweep.status);
  if (role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kId:
      return QVariant::fromValue<qlonglong>(sweep.id);
    case kName:
      return untrustedLine(sweep.name);
    case kStatus:
      return untrustedLine(sweep.status);
    case kMembers:
      return QString("%1 of %2 ended").arg(sweep.membersEnded()).arg(sweep.members.size());
    case kFields: {
      QStringList fields;
      for (const std::string& field : sweptFields(sweep.plan_json)) fields << untrustedLine(field);
      return fields.join(" × ");
    }
    case kCreated:
      return QDateTime::fromMSecsSinceEpoch(static_cast<qint64>(sweep.created_at * 1000))
          .toString("yyyy-MM-dd HH:mm");
    default:
      return {};
  }
}

QVariant SweepListModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  static const char* const names[] = {"Id", "Name", "Status", "Members", "Swept fields", "Created"};
  return section >= 0 && section < kColumnCount ? QString(names[section]) : QVariant();
}

// ---- A sweep's members ----------------------------------------------------------------------

void SweepMembersModel::setReport(const json& report, const std::string& rank_by) {
  std::vector<QString> columns = {kPosition};
  const json& sweep = report.value("sweep", json::object());
  for (const std::string& field : sweep.value("fields", std::vector<std::string>{}))
    columns.push_back(QString::fromStdString(field));
  columns.insert(columns.end(), {kState, kRun, kStatus});
  std::vector<json> members = report.value("members", std::vector<json>{});
  // The ranking figure first, then every other run figure a member has, in the table's order.
  const std::string ranking = rank_by.empty() ? "final_loss" : rank_by;
  columns.push_back(QString::fromStdString(ranking));
  for (const storage::Figure& figure : storage::figureTable()) {
    if (!storage::isRunFigure(figure) || figure.id == ranking) continue;
    const std::string id(figure.id);
    const bool any = std::any_of(members.begin(), members.end(), [&](const json& member) {
      return member.contains("figures") && member["figures"].value(id, json()).is_number();
    });
    if (any) columns.push_back(QString::fromStdString(id));
  }
  columns.push_back(kError);
  const json& best = report.value("best", json());
  const std::optional<int64_t> best_run =
      best.is_object() && best.value("run", json()).is_number_integer()
          ? std::optional<int64_t>(best["run"].get<int64_t>())
          : std::nullopt;
  const bool same_shape = columns == columns_ && members.size() == members_.size();
  if (!same_shape) beginResetModel();
  columns_ = std::move(columns);
  best_run_ = best_run;
  if (same_shape) {
    // A live refresh: the rows are the same members, their figures moved (and with them, maybe,
    // their order), so the selection follows its member.
    reorder([&] {
      members_ = std::move(members);
      orderMembers();
    });
    if (!members_.empty()) emit dataChanged(index(0, 0), index(rowCount() - 1, columnCount() - 1));
    return;
  }
  members_ = std::move(members);
  orderMembers();
  endResetModel();
}

QString SweepMembersModel::columnKey(int column) const {
  return column >= 0 && column < columnCount() ? columns_[static_cast<size_t>(column)] : QString();
}

int SweepMembersModel::columnOf(const QString& key) const {
  const auto at = std::find(columns_.begin(), columns_.end(), key);
  return at == columns_.end() ? -1 : static_cast<int>(at - columns_.begin());
}

std::optional<int64_t> SweepMembersModel::runAt(int row) const {
  const json& run = memberAt(row).value("run", json());
  return run.is_number_integer() ? std::optional<int64_t>(run.get<int64_t>()) : std::nullopt;
}

int SweepMembersModel::rowOfRun(int64_t run_id) const {
  for (int row = 0; row < rowCount(); ++row)
    if (runAt(row) == run_id) return row;
  return -1;
}

int SweepMembersModel::rowOfPosition(int position) const {
  for (int row = 0; row < rowCount(); ++row)
    if (memberAt(row).value("position", -1) == position) return row;
  return -1;
}

int SweepMembersModel::bestRow() const {
  return best_run_ ? rowOfRun(*best_run_) : -1;
}

int SweepMembersModel::rowCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(members_.size());
}

int SweepMembersModel::columnCount(const QModelIndex& parent) const {
  return parent.isValid() ? 0 : static_cast<int>(columns_.size());
}

QVariant SweepMembersModel::display(const json& member, const QString& key) const {
  const std::string id = key.toStdString();
  const auto orDash = [](const json& value) {
    return value.is_null() ? QString("–") : untrustedLine(valueText(value));
  };
  // Members are numbered from 1 on screen, as `ringmaster sweep` numbers them.
  if (key == kPosition) return member.value("position", 0) + 1;
  if (key == kState) return untrustedLine(member.value("state", "")).replace('_', ' ');
  if (key == kRun) return orDash(member.value("run", json()));
  if (key == kStatus) return untrustedLine(member.value("status", ""));
  if (key == kError) return orDash(member.value("error", json()));
  if (storage::findFigure(id)) {
    const json& value = member.value("figures", json::object()).value(id, json());
    if (!value.is_number()) return QString("–");
    // A count (steps) as the integer it is; the other kinds as the charts write them.
    return storage::figure(id).kind == storage::FigureKind::kCount
               ? QString::number(std::llround(value.get<double>()))
               : formatFigureValue(id, value.get<double>());
  }
  return orDash(member.value("values", json::object()).value(id, json()));
}

QVariant SweepMembersModel::sortValue(const json& member, const QString& key) const {
  const std::string id = key.toStdString();
  json value;
  if (key == kPosition || key == kRun || key == kState || key == kStatus || key == kError)
    value = member.value(id, json());
  else if (storage::findFigure(id))
    value = member.value("figures", json::object()).value(id, json());
  else
    value = member.value("values", json::object()).value(id, json());
  if (value.is_number()) return value.get<double>();
  if (value.is_null() || (value.is_string() && value.get<std::string>().empty())) return {};
  return QString::fromStdString(valueText(value));
}

QVariant SweepMembersModel::data(const QModelIndex& index, int role) const {
  if (!checkIndex(index, CheckIndexOption::IndexIsValid | CheckIndexOption::ParentIsInvalid))
    return {};
  const json& member = members_[static_cast<size_t>(index.row())];
  const QString& key = columns_[static_cast<size_t>(index.column())];
  const bool best = best_run_ && member.value("run", json()) == *best_run_;
  switch (role) {
    case Qt::DisplayRole:
      return display(member, key);
    case kSortRole:
      return sortValue(member, key);
    case Qt::BackgroundRole:
      return best ? QVariant(kBestBackground) : QVariant();
    case Qt::FontRole: {
      if (!best) return {};
      QFont bold;
      bold.setBold(true);
      return bold;
    }
    case Qt::ForegroundRole:
      if (key == kStatus) return statusColor(member.value("status", ""));
      if (key == kState && member.value("state", "") == "refused") return kRefused;
      return {};
    case Qt::ToolTipRole: {
      const json& error = member.value("error", json());
      return error.is_string() && (key == kState || key == kStatus || key == kError)
                 ? QVariant(richTextShowingPlain(untrustedBlock(error.get<std::string>())))
                 : QVariant();
    }
    case Qt::TextAlignmentRole:
      return sortValue(member, key).typeId() == QMetaType::Double
                 ? QVariant(Qt::AlignRight | Qt::AlignVCenter)
                 : QVariant();
    default:
      return {};
  }
}

QVariant SweepMembersModel::headerData(int section, Qt::Orientation orientation, int role) const {
  if (orientation != Qt::Horizontal || section < 0 || section >= columnCount()) return {};
  const QString& key = columns_[static_cast<size_t>(section)];
  const bool figure = storage::findFigure(key.toStdString()) != nullptr;
  if (role == Qt::ToolTipRole && figure) {
    const std::string_view description = storage::figure(key.toStdString()).description;
    return QString::fromUtf8(description.data(), static_cast<qsizetype>(description.size()));
  }
  if (role != Qt::DisplayRole) return {};
  if (key == kPosition) return QString("#");
  if (figure) return figureHeading(key.toStdString());
  if (key == kState || key == kRun || key == kStatus || key == kError) {
    QString heading = key;
    heading[0] = heading[0].toUpper();
    return heading;
  }
  return untrustedLine(key.toStdString());  // a swept field's path
}

void SweepMembersModel::orderMembers() {
  if (columnOf(sort_key_) < 0) return;
  const QString key = sort_key_;
  const bool descending = sort_order_ == Qt::DescendingOrder;
  std::stable_sort(members_.begin(), members_.end(), [&](const json& a, const json& b) {
    const QVariant va = sortValue(a, key), vb = sortValue(b, key);
    if (!va.isValid() || !vb.isValid()) return va.isValid() && !vb.isValid();  // none last
    const QPartialOrdering order = QVariant::compare(va, vb);
    return descending ? order == QPartialOrdering::Greater : order == QPartialOrdering::Less;
  });
}

void SweepMembersModel::sort(int column, Qt::SortOrder order) {
  if (column < 0 || column >= columnCount()) return;
  reorder([&] {
    sort_key_ = columns_[static_cast<size_t>(column)];
    sort_order_ = order;
    orderMembers();
  });
}

void SweepMembersModel::reorder(const std::function<void()>& change) {
  emit layoutAboutToBeChanged({}, QAbstractItemModel::VerticalSortHint);
  const QModelIndexList before = persistentIndexList();
  std::vector<int> positions;  // each persistent index's member, by position
  for (const QModelIndex& index : before)
    positions.push_back(memberAt(index.row()).value("position", -1));
  change();
  QModelIndexList after;
  for (size_t i = 0; i < positions.size(); ++i)
    after.push_back(index(rowOfPosition(positions[i]), before[static_cast<qsizetype>(i)].column()));
  changePersistentIndexList(before, after);
  emit layoutChanged({}, QAbstractItemModel::VerticalSortHint);
}

// ---- The best run's differences -------------------------------------------------------------

void SweepDifferencesModel::setBest(const json& best) {
  std::vector<SweepDifference> rows;
  best_run_.reset();
  if (best.is_object()) {
    if (best.value("run", json()).is_number_integer()) best_run_ = best["run"].get<int64_t>();
    for (const json& difference : best.value("differences", json::array())) {
      SweepDifference row{.field = difference.value("field", ""),
                          .value = valueText(difference.value("value", json()))};
      for (const json& other : difference.value("others", json::array()))
        row.others.push_back(valueText(other));
      rows.push_back(std::move(row));
    }
  }
  replaceRows(std::move(rows), false);
}

QVariant SweepDifferencesModel::data(const QModelIndex& index, int role) const {
  const SweepDifference* row = rowAt(index);
  if (!row || role != Qt::DisplayRole) return {};
  switch (index.column()) {
    case kField:
      return untrustedLine(row->field);
    case kBest:
      return untrustedLine(row->value);
    case kOthers: {
      QStringList others;
      for (const std::string& other : row->others) others << untrustedLine(other);
      return others.join(", ");
    }
    default:
      return {};
  }
}

QVariant SweepDifferencesModel::headerData(int section, Qt::Orientation orientation,
                                           int role) const {
  if (role != Qt::DisplayRole || orientation != Qt::Horizontal) return {};
  switch (section) {
    case kField:
      return QString("Field");
    case kBest:
      return best_run_ ? QString("Run %1 (best)").arg(*best_run_) : QString("Best");
    case kOthers:
      return QString("The others");
    default:
      return {};
  }
}

}  // namespace ringmaster::ui
