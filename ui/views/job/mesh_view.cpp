// MeshView: the sizes written into the document at strategy.mesh, the parser's layout problems
// beside them, and the spec's mesh picture put into the grid's text, rank by rank.
#include "views/job/mesh_view.h"

#include <QHBoxLayout>
#include <QLabel>
#include <QSpinBox>
#include <QVBoxLayout>
#include <algorithm>

#include "data/mesh_picture.h"
#include "models/format.h"
#include "spec/spec_fields.h"
#include "views/job/spec_document.h"
#include "widgets/mesh_grid.h"
#include "widgets/one_line_label.h"

namespace ringmaster::ui {

namespace {

constexpr std::string_view kMeshPath = "strategy.mesh";

QString dimName(MeshDim dim) {
  const std::string_view name = toString(dim);
  return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

std::string sizePath(MeshDim dim) {
  return std::string(kMeshPath) + "." + std::string(toString(dim));
}

// What each size means, on hover (the spec's own help when it describes the field).
QString sizeHelp(MeshDim dim) {
  if (const SpecField* field = findSpecField(sizePath(dim)))
    return QString::fromStdString(field->help);
  switch (dim) {
    case MeshDim::kDp:
      return "Data-parallel replicas (strategy.mesh.dp): each trains on its own share of the batch";
    case MeshDim::kTp:
      return "Tensor-parallel ranks (strategy.mesh.tp): each holds a slice of every layer's heads, "
             "MLP and vocabulary (the GPT only)";
    case MeshDim::kPp:
      return "Pipeline stages (strategy.mesh.pp): each holds a contiguous run of the model's "
             "blocks";
  }
  return {};
}

// A problem the mesh view shows: at strategy.mesh or one of its fields.
bool meshProblem(const SpecProblem& problem) {
  return problem.path == kMeshPath || problem.path.starts_with(std::string(kMeshPath) + ".");
}

// "block 3", "blocks 0–2", one range per stage ("blocks 0–1, 4–5" for virtual stages).
QString blockIndices(const std::vector<BlockRange>& stages) {
  QStringList ranges;
  for (const auto& [first, end] : stages)
    ranges << (end - first == 1 ? QString::number(first)
                                : QString("%1–%2").arg(first).arg(end - 1));
  const bool one = stages.size() == 1 && stages.front().second - stages.front().first == 1;
  return QString(one ? "block %1" : "blocks %1").arg(ranges.join(", "));
}

// The blocks' names: "h.0", "embedding–h.1", one range per stage.
QString blockNames(const std::vector<BlockRange>& stages, const std::vector<std::string>& names) {
  QStringList ranges;
  for (const auto& [first, end] : stages) {
    const QString from = QString::fromStdString(names.at(first));
    ranges << (end - first == 1 ? from : from + "–" + QString::fromStdString(names.at(end - 1)));
  }
  return ranges.join(", ");
}

QString vocabularyLine(const VocabularySlice& slice, int tp) {
  if (tp == 1) return QString("vocab: all %1").arg(slice.vocabulary);
  return QString("vocab [%1, %2)").arg(slice.first).arg(slice.end);
}

QString memoryLine(const MeshRankPicture& rank) {
  return rank.memory ? "memory " + formatBytes(rank.memory->total())
                     : QString("estimate unavailable");
}

// On hover over a rank: everything about it, the memory estimate part by part.
QString rankTooltip(const MeshRankPicture& rank, const MeshPicture& picture) {
  QStringList lines;
  lines << QString("Rank %1: dp %2, tp %3, pp %4")
               .arg(rank.rank)
               .arg(rank.at.dp)
               .arg(rank.at.tp)
               .arg(rank.at.pp);
  lines << QString("%1: %2").arg(blockIndices(rank.stages),
                                 blockNames(rank.stages, picture.block_names));
  if (rank.vocabulary)
    lines << QString("Vocabulary rows [%1, %2) of %3")
                 .arg(rank.vocabulary->first)
                 .arg(rank.vocabulary->end)
                 .arg(rank.vocabulary->vocabulary);
  if (!rank.memory) {
    lines << "Memory: estimate unavailable: " + QString::fromStdString(picture.memory_unavailable);
    return lines.join('\n');
  }
  lines << "Memory (estimate): " + formatBytes(rank.memory->total());
  for (const MemoryPart& part : rank.memory->parts)
    lines << QString("  %1: %2").arg(QString::fromStdString(part.name), formatBytes(part.bytes));
  return lines.join('\n');
}

MeshGridData gridOf(const MeshPicture& picture) {
  const MeshSpec& mesh = picture.mesh;
  MeshGridData grid{.dp = mesh.dp, .tp = mesh.tp, .pp = mesh.pp};
  for (int p = 0; p < mesh.pp; ++p) {
    const MeshRankPicture& first = picture.ranks.at(static_cast<size_t>(meshRank(mesh, {.pp = p})));
    grid.stage_titles << QString("pp %1 · %2: %3")
                             .arg(p)
                             .arg(blockIndices(first.stages),
                                  blockNames(first.stages, picture.block_names));
  }
  for (const MeshRankPicture& rank : picture.ranks) {
    MeshGridCell cell{.rank = rank.rank, .dp = rank.at.dp, .tp = rank.at.tp, .pp = rank.at.pp};
    cell.lines << QString("rank %1").arg(rank.rank)
               << QString("dp %1 · tp %2 · pp %3").arg(rank.at.dp).arg(rank.at.tp).arg(rank.at.pp)
               << blockIndices(rank.stages);
    if (rank.vocabulary) cell.lines << vocabularyLine(*rank.vocabulary, mesh.tp);
    cell.lines << memoryLine(rank);
    cell.tooltip = rankTooltip(rank, picture);
    grid.cells.push_back(std::move(cell));
  }
  return grid;
}

}  // namespace

MeshView::MeshView(nlohmann::json& document, QWidget* parent)
    : QGroupBox("Device mesh: dp × tp × pp", parent), document_(document) {
  setObjectName("meshGroup");
  auto* layout = new QVBoxLayout(this);
  auto* sizes = new QHBoxLayout();
  for (size_t i = 0; i < kMeshDims.size(); ++i) {
    const MeshDim dim = kMeshDims[i];
    auto* box = new QSpinBox();
    box->setObjectName(QString::fromStdString(sizePath(dim)));
    box->setRange(1, static_cast<int>(kMaxWorldSize));
    box->setToolTip(sizeHelp(dim));
    sizes_[i] = box;
    sizes->addWidget(new QLabel((i == 0 ? QString() : QString("× ")) + dimName(dim)));
    sizes->addWidget(box);
    connect(box, &QSpinBox::valueChanged, this, [this, dim](int value) { sizeEdited(dim, value); });
  }
  sizes->addStretch(1);
  layout->addLayout(sizes);
  // One line, there when empty: a problem moves nothing below it (the whole text on hover).
  error_ = new OneLineLabel();
  error_->setObjectName("strategy.mesh.error");
  error_->setStyleSheet("color: #b3261e; font-size: small;");
  layout->addWidget(error_);
  grid_ = new MeshGrid();
  grid_->setObjectName("meshGrid");
  layout->addWidget(grid_);
  note_ = new OneLineLabel();
  note_->setObjectName("meshNote");
  note_->setStyleSheet("color: #5f5f5f; font-size: small;");
  layout->addWidget(note_);
}

QSpinBox* MeshView::sizeBox(MeshDim dim) const {
  return sizes_.at(
      static_cast<size_t>(std::find(kMeshDims.begin(), kMeshDims.end(), dim) - kMeshDims.begin()));
}

QString MeshView::errorText() const {
  return error_->text();
}

QString MeshView::noteText() const {
  return note_->text();
}

void MeshView::sizeEdited(MeshDim dim, int value) {
  if (updating_) return;
  // A strategy in the flat form of before the mesh (strategy.kind) is written in the mesh's form
  // first, as the spec's toJson writes it, so that the size joins a strategy the parser reads;
  // its dp is left to the parser (the world / (tp × pp)) until set here, so that a change of tp
  // or pp keeps the mesh the world's size.
  const nlohmann::json* strategy = getPath(document_, "strategy");
  if (!(strategy && isMeshForm(*strategy)) && !canonical_strategy_.is_null()) {
    document_["strategy"] = canonical_strategy_;
    setPath(document_, sizePath(MeshDim::kDp), std::nullopt);
  }
  setPath(document_, sizePath(dim), value);
  emit edited();
}

void MeshView::showMesh(const std::optional<JobSpec>& spec,
                        const std::vector<SpecProblem>& problems) {
  if (jobKindOf(document_) == JobKind::kProgram) {
    hide();
    return;
  }
  show();
  canonical_strategy_ = spec ? toJson(*spec)["strategy"] : nlohmann::json();
  showSizes(spec);
  QStringList errors, reasons;
  for (const SpecProblem& problem : problems) {
    if (!meshProblem(problem)) continue;
    const QString message = QString::fromStdString(problem.message);
    const QString field = QString::fromStdString(problem.path.substr(kMeshPath.size()));
    errors << (field.isEmpty() ? message : field.mid(1) + ": " + message);
    reasons << QString("%1: %2").arg(QString::fromStdString(problem.path), message);
  }
  error_->setMessage(errors.join('\n'));
  note_->setMessage({});
  if (!reasons.isEmpty()) {
    grid_->setExplanation("No grid: this layout is invalid", reasons);
    return;
  }
  if (!spec) {
    grid_->setExplanation("No grid while the spec has problems",
                          {"Fix them (listed beside Launch) to see each rank's coordinates, "
                           "blocks, vocabulary rows and memory."});
    return;
  }
  if (spec->strategy.mesh.size() > kMaxDrawnRanks) {
    grid_->setExplanation(
        QString("%1 ranks: too many to draw").arg(spec->strategy.mesh.size()),
        {QString("The drawing shows a mesh of at most %1 ranks.").arg(kMaxDrawnRanks)});
    return;
  }
  // An exception out of here would bring the editor down: a picture it cannot make is said.
  try {
    showPicture(meshPicture(*spec));
  } catch (const std::exception& e) {
    grid_->setExplanation("No grid", {QString::fromUtf8(e.what())});
  }
}

// The parsed spec's sizes; while it has problems, those the document writes (the others as
// they were).
void MeshView::showSizes(const std::optional<JobSpec>& spec) {
  updating_ = true;
  for (size_t i = 0; i < kMeshDims.size(); ++i) {
    const MeshDim dim = kMeshDims[i];
    if (spec) {
      sizes_[i]->setValue(meshSize(spec->strategy.mesh, dim));
      continue;
    }
    const nlohmann::json* value = getPath(document_, sizePath(dim));
    if (value && value->is_number_integer())
      sizes_[i]->setValue(
          static_cast<int>(std::clamp<int64_t>(value->get<int64_t>(), 1, kMaxWorldSize)));
  }
  // The product in the title: the row of sizes stays as narrow as the form.
  int64_t ranks = 1;
  for (QSpinBox* box : sizes_) ranks *= box->value();
  setTitle(QString("Device mesh: dp × tp × pp = %1 rank%2").arg(ranks).arg(ranks == 1 ? "" : "s"));
  updating_ = false;
}

void MeshView::showPicture(const MeshPicture& picture) {
  grid_->setGrid(gridOf(picture));
  if (!picture.memory_unavailable.empty())
    note_->setMessage("Memory: estimate unavailable for this layout: " +
                      QString::fromStdString(picture.memory_unavailable));
}

}  // namespace ringmaster::ui
