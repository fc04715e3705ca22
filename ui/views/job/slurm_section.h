// The job editor's Slurm section (issue 35): where the job runs, the hosts list (launch.hosts) or a
// Slurm cluster (launch.scheduler {"kind": "slurm", ...}), where sbatch runs (this machine or a
// login node: launch.scheduler.submit_from), and the batch script the job would be submitted with
// (remote/slurm/slurm_script.h), read-only, as the spec now stands. The scheduler's fields are the
// form's own rows (SpecForm builds them from the spec's description, the parser's problems shown
// at them); this part only chooses, keeps what was left for a switch back, and shows the script.
#pragma once

#include <QWidget>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>
#include <string_view>

#include "spec/job_spec.h"

class QComboBox;
class QLabel;
class QPlainTextEdit;

namespace ringmaster::ui {

// The form's group of launch.scheduler's fields.
inline constexpr std::string_view kSlurmSection = "Slurm";

// Whether the document hands the job to a scheduler (it has launch.scheduler).
bool slurmChosen(const nlohmann::json& document);
// Whether a launch.scheduler field applies to the document: a scheduler is chosen, and, for a
// submit_from field, a login node too.
bool slurmFieldApplies(const nlohmann::json& document, const std::string& path);

class SlurmSection : public QWidget {
  Q_OBJECT

 public:
  // `document` outlives the section, which edits it in place. The section is the choice of hosts
  // or Slurm; that of where sbatch runs and the script are widgets of their own, placed by the
  // owner.
  explicit SlurmSection(nlohmann::json& document, QWidget* parent = nullptr);

  // Shows the document's choices, and the script of `spec` (the parsed document, nullopt while it
  // has problems: the last script is then kept, greyed, and said to be out of date).
  void showDocument(const std::optional<JobSpec>& spec);
  // Forgets what was kept for a switch back (another spec was opened).
  void forgetKept();

  // The choice of where sbatch runs, a row of its own placed by the owner before the login node's
  // fields.
  QWidget* submitFromRow() const { return submit_from_row_; }
  QWidget* scriptPreview() const { return preview_; }
  QComboBox* runsOnChoice() const { return runs_on_; }
  QComboBox* submitFromChoice() const { return submit_from_; }
  QString scriptText() const;
  // Above the script: what it is, or why it is out of date.
  QString scriptNote() const;

 signals:
  // The user chose: the document holds the choice.
  void edited();

 private:
  void chooseSlurm(bool slurm);
  void chooseLoginNode(bool login_node);

  nlohmann::json& document_;
  // What a switch took out, for the switch back.
  std::optional<nlohmann::json> kept_hosts_, kept_scheduler_, kept_submit_from_;
  QComboBox* runs_on_ = nullptr;
  QComboBox* submit_from_ = nullptr;
  QWidget* submit_from_row_ = nullptr;
  QWidget* preview_ = nullptr;
  QLabel* note_ = nullptr;
  QPlainTextEdit* script_ = nullptr;
};

}  // namespace ringmaster::ui
