// The job editor's form, built from the spec's field description (engine/spec/spec_fields.h): what
// the job runs (engine or script), then a group per section and a row per field the form can edit,
// in the description's order, each editor chosen by the field's type (a menu of its choices, a
// check box, a line, one item or NAME=VALUE per line, a path with Choose…), and the hosts table at
// launch.hosts. It edits the document it is given in place and says so (edited); rows of a kind
// not chosen are taken out unless the document holds them; the parser's problems are shown at
// their fields. launch.scheduler's fields (issue 35) are the Slurm group's, shown while the spec
// has a scheduler (slurm_section.h), when the hosts table is not. It parses nothing itself.
#pragma once

#include <QWidget>
#include <functional>
#include <map>
#include <memory>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "spec/job_spec.h"
#include "spec/spec_fields.h"

class QCheckBox;
class QComboBox;
class QFormLayout;

namespace ringmaster::ui {

class HostsTable;

class SpecForm : public QWidget {
  Q_OBJECT

 public:
  // Asks for a path or directory field's value ("" when cancelled).
  using PathChooser = std::function<QString(const SpecField& field, const QString& current)>;

  // `document` outlives the form, which edits it in place.
  SpecForm(nlohmann::json& document, PathChooser choose_path, QWidget* parent = nullptr);
  ~SpecForm() override;

  void setPathChooser(PathChooser chooser) { choose_path_ = std::move(chooser); }
  // Shows the document's values (after it changed elsewhere).
  void refresh();
  // Shows each problem at its field (an entry of a list at the list, a variable of a map at the
  // map, a section at its first field, the hosts' under the hosts table); a field with a problem
  // is never hidden.
  void showProblems(const std::vector<SpecProblem>& problems);

  // Puts `widget` (a part that edits fields of its own, as the mesh view does strategy.mesh) right
  // under the group of `section` ("Strategy").
  void addAfterSection(const std::string& section, QWidget* widget);
  // Puts `widget` as a row of the whole width in the group of `section` (made, last, when the
  // description has no field there): at its top, its bottom, or before the first row of a field
  // whose path starts with `before` (the bottom when none does), shown while `shown(document)`
  // holds: the Slurm section's choices and its batch script.
  enum class RowPlace { kTop, kBottom, kBefore };
  void addToSection(const std::string& section, QWidget* widget, RowPlace place,
                    std::function<bool(const nlohmann::json& document)> shown,
                    const std::string& before = {});

  QComboBox* jobKindChoice() const { return job_kind_; }
  QString fieldError(const std::string& path) const;
  QWidget* field(const std::string& path) const;

 protected:
  // A click on a check box's help toggles the box.
  bool eventFilter(QObject* watched, QEvent* event) override;

 signals:
  // The user edited a field: the document holds the new value.
  void edited();
  // The user chose the other kind of job (the document is not changed yet).
  void jobKindChosen(JobKind kind);

 private:
  struct Field;
  void buildForm();
  void addField(QFormLayout* form, const SpecField& field);
  void addHostsRow(QFormLayout* form, const SpecField& hosts);
  QFormLayout* addGroup(const std::string& section);
  void formEdited(const std::string& path);
  void choosePath(const std::string& path);
  void layOutRows();

  nlohmann::json& document_;
  PathChooser choose_path_;
  bool updating_ = false;
  std::map<std::string, std::unique_ptr<Field>> fields_;
  std::unique_ptr<Field> hosts_row_;  // the hosts table's row: shown for both kinds of job
  // Each form's rows in the order built, and those now in it (hidden rows are taken out); the
  // group box of each form, hidden when none of its rows is shown.
  std::map<QFormLayout*, std::vector<Field*>> form_rows_, laid_out_;
  std::map<QFormLayout*, QWidget*> boxes_;
  std::map<std::string, QFormLayout*> section_forms_;  // each section's (first) group
  // The rows addToSection added, each with when it is shown.
  std::vector<std::pair<std::unique_ptr<Field>, std::function<bool(const nlohmann::json&)>>>
      whole_rows_;
  std::map<QObject*, QCheckBox*> check_help_;  // each check box's help label, and the box
  QComboBox* job_kind_ = nullptr;
  HostsTable* hosts_ = nullptr;
};

}  // namespace ringmaster::ui
