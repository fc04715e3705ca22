// The job editor: the spec's form (SpecForm, built from the spec's field description, with the
// hosts table), checked on every edit by the engine's own spec parser with its message shown next
// to the field, and the device mesh drawn under the strategy (MeshView); the spec's JSON beside the
// form, kept in sync both ways; the Slurm section (where the job runs, and the batch script it
// would be submitted with: issue 35); load and save; and, before launch, the estimate panel (memory
// per rank and, for pipelines, the planned schedule). A job runs Ringmaster's engine or the user's
// PyTorch script (a program job, issue 19: its own section, no estimate or planned schedule). It
// opens on the smallest shipped example and offers the others; beside Launch it lists every reason
// the spec cannot be launched yet. "Plan layouts…" (issue 37, engine jobs) opens the layout
// advisor (views/job/plan_view.h) on the spec as it is.
#pragma once

#include <QWidget>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "spec/job_spec.h"
#include "spec/spec_fields.h"

class QComboBox;
class QLayout;
class QLabel;
class QPlainTextEdit;
class QPushButton;
class QCheckBox;

namespace ringmaster::ui {

class EstimatePanel;
class MeshView;
class OneLineLabel;
class PlanView;
class GanttChart;
class SlurmSection;
class SpecForm;

// A spec shipped with Ringmaster (resources/examples/*.json, built into the application).
struct ExampleSpec {
  QString name;         // the file's base name: "ddp_mlp"
  QString description;  // the spec's own description
  QString path;         // a Qt resource path: ":/examples/ddp_mlp.json"
};
// Every shipped example, the smallest first.
std::vector<ExampleSpec> exampleSpecs();

class JobEditor : public QWidget {
  Q_OBJECT

 public:
  explicit JobEditor(QWidget* parent = nullptr);
  ~JobEditor() override;

  // Replaces the spec (a JSON document); the form, JSON view and checks follow.
  void setDocument(const nlohmann::json& document);
  const nlohmann::json& document() const { return document_; }
  // Loads / saves a spec file; false with the reason in lastFileError().
  bool loadFile(const QString& path);
  bool saveFile(const QString& path);
  QString lastFileError() const { return file_error_; }
  // Replaces the spec with a shipped example (by name); false when there is none of that name.
  bool startFromExample(const QString& name);
  QComboBox* exampleChoice() const { return examples_; }
  // What the example picker shows: the example's name, the file's name (an item after the
  // examples) or "spec NAME" for one set by setDocument.
  QString openSpecName() const;

  // What the job runs: Ringmaster's engine or the user's script (spec_fields.h's JobKind, one
  // item each, in that order). Choosing the other takes the sections of this kind out of the spec
  // and keeps them, so that choosing back restores them; a first switch to a script asks for it.
  QComboBox* jobKindChoice() const;
  // Asks for a path or directory field's value ("" when cancelled): a file dialog unless replaced
  // (tests answer without a dialog).
  using PathChooser = std::function<QString(const SpecField& field, const QString& current)>;
  void setPathChooser(PathChooser chooser) { choose_path_ = std::move(chooser); }

  // The parsed spec when it has no problems.
  const std::optional<JobSpec>& spec() const { return spec_; }
  const std::vector<SpecProblem>& problems() const { return problems_; }
  // The message shown next to the field with this spec path ("" when none; for strategy.mesh and
  // its sizes, every problem of the mesh, shown beside its sizes).
  QString fieldError(const std::string& path) const;
  // The widget editing a spec path (for tests and focus on error).
  QWidget* field(const std::string& path) const;
  QString memoryText() const;
  // The device mesh: its sizes, its problems and its drawing (issue 34).
  MeshView* meshView() const { return mesh_; }
  // Where the job runs (the hosts or Slurm) and the batch script (issue 35).
  SlurmSection* slurmSection() const { return slurm_; }
  const GanttChart& plannedSchedule() const;
  QString plannedText() const;
  // Beside the planned schedule when its bubble is above half the step ("" when none).
  QString bubbleHintText() const;
  QPushButton* launchButton() const { return launch_; }
  // "Detached": the job is launched with `ringmaster run --detach` and goes on when the window,
  // the launching process or the SSH connection goes away (issue 21).
  bool detachChosen() const;
  QCheckBox* detachBox() const { return detach_; }
  // Beside Launch: every reason it is disabled, one per line ("Ready to launch" when none).
  QString launchStatusText() const;

  // The layout advisor (issue 37): how it runs `ringmaster plan` (the window sets it; without it
  // "Plan layouts…" is disabled), its button, and the advisor window last opened (nullptr for
  // none). openPlanView runs the plan on the spec as it is now; nullptr when the spec is not a
  // valid engine job or no command is set.
  void setPlanCommand(const QString& ringmaster, const QString& db_path);
  QPushButton* planButton() const { return plan_; }
  PlanView* openPlanView();
  PlanView* planView() const { return plan_view_; }
  // Sets a layout's overrides (dotted field -> JSON value, as `session::applyOverrides` reads
  // them) in the spec; the form and JSON follow. launchWithOverrides then launches the result
  // as Launch does (when it is valid).
  void applyOverrides(const nlohmann::json& overrides);
  void launchWithOverrides(const nlohmann::json& overrides);

 signals:
  // The user asked to launch this (valid) spec.
  void launchRequested(const nlohmann::json& document);

 private:
  QLayout* buildExamplesRow();
  QWidget* buildFormSide();
  QWidget* buildSpecSide();
  QLayout* buildLaunchRow();
  void showDocument(const nlohmann::json& document, nlohmann::ordered_json key_order);
  void nameOpenSpec(const QString& name, const QString& file);
  void jobKindChosen(JobKind kind);
  void jsonEdited();
  void refreshJson();
  void check();
  void showLaunchStatus(const QStringList& reasons);

  // The picker's item of the spec open when it is not an example: this role holds its file ("" for
  // none).
  static constexpr int kOpenSpecRole = Qt::UserRole + 1;

  nlohmann::json document_;
  // The JSON text's key order: the text read or last shown (nlohmann::json sorts its keys).
  nlohmann::ordered_json key_order_;
  std::optional<JobSpec> spec_;
  std::vector<SpecProblem> problems_;
  // The sections of the kind of job not chosen now, kept for a switch back (JSON objects by key).
  nlohmann::json kept_engine_ = nlohmann::json::object();
  nlohmann::json kept_program_;
  bool updating_ = false;
  QString file_error_;

  SpecForm* form_ = nullptr;
  MeshView* mesh_ = nullptr;
  SlurmSection* slurm_ = nullptr;
  EstimatePanel* estimates_ = nullptr;
  QPlainTextEdit* json_ = nullptr;
  OneLineLabel* json_error_ = nullptr;
  QLabel* launch_status_ = nullptr;
  QComboBox* examples_ = nullptr;
  PathChooser choose_path_;
  QLabel* example_note_ = nullptr;
  QPushButton* launch_ = nullptr;
  QCheckBox* detach_ = nullptr;
  QPushButton* plan_ = nullptr;
  QString plan_ringmaster_, plan_db_path_;
  PlanView* plan_view_ = nullptr;
};

}  // namespace ringmaster::ui
