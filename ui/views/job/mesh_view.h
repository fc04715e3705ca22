// The job editor's device mesh (issue 34), shown beside the strategy's fields: the dp, tp and pp
// sizes as number boxes bound to strategy.mesh.dp / .tp / .pp of the spec document, the spec
// parser's problems with the layout next to them, and the mesh drawn (MeshGrid): each rank's
// coordinates, the model blocks and vocabulary rows it holds and its memory estimate
// (data/mesh_picture.h), or, for an invalid layout, why there is no grid. It parses nothing: the
// editor hands it the parser's result. A program job has no mesh here (its script lays out its
// own ranks).
#pragma once

#include <QGroupBox>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <vector>

#include "spec/job_spec.h"
#include "spec/mesh_layout.h"

class QSpinBox;

namespace ringmaster::ui {

class MeshGrid;
struct MeshPicture;
class OneLineLabel;

class MeshView : public QGroupBox {
  Q_OBJECT

 public:
  // `document` outlives the view, which edits it in place.
  explicit MeshView(nlohmann::json& document, QWidget* parent = nullptr);

  // Shows the document's mesh: the parsed spec's sizes (while it has problems, those the document
  // writes), the problems at strategy.mesh and its fields, and the grid of the spec (nullopt
  // while it has problems).
  void showMesh(const std::optional<JobSpec>& spec, const std::vector<SpecProblem>& problems);

  // The most ranks drawn; a bigger world is said, not drawn.
  static constexpr int kMaxDrawnRanks = 256;

  QSpinBox* sizeBox(MeshDim dim) const;
  // The problems shown next to the sizes, one per line ("" when none).
  QString errorText() const;
  // Under the grid: why ranks have no memory estimate ("" when they all have one).
  QString noteText() const;
  const MeshGrid& grid() const { return *grid_; }

 signals:
  // The user changed a size: the document holds it.
  void edited();

 private:
  void sizeEdited(MeshDim dim, int value);
  void showSizes(const std::optional<JobSpec>& spec);
  void showPicture(const MeshPicture& picture);

  nlohmann::json& document_;
  // The parsed spec's strategy as toJson writes it (null while the spec has problems).
  nlohmann::json canonical_strategy_;
  bool updating_ = false;
  std::array<QSpinBox*, 3> sizes_{};  // in kMeshDims order
  OneLineLabel* error_ = nullptr;
  MeshGrid* grid_ = nullptr;
  OneLineLabel* note_ = nullptr;
};

}  // namespace ringmaster::ui
