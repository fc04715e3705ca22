// The layout advisor in the job editor (issue 37): a window that runs `ringmaster plan --json`
// on the editor's spec (and `--trials K` when asked) as a child process, never on the GUI thread,
// and shows its answer: every valid layout in a sortable table with its predicted step split
// into its terms, the top K marked, the dropped layouts with why and the refused count, and after
// trials each trial's terms predicted against measured. It does not launch or edit anything
// itself: "Use this layout" and "Launch best" hand a layout's overrides to the editor.
#pragma once

#include <QDialog>
#include <QFile>
#include <QProcess>
#include <QTemporaryDir>
#include <QTimer>
#include <memory>
#include <nlohmann/json.hpp>
#include <optional>

#include "models/plan_models.h"

class QLabel;
class QPlainTextEdit;
class QPushButton;
class QSortFilterProxyModel;
class QSpinBox;
class QTableView;

namespace ringmaster::ui {

// How the window runs the advisor: the `ringmaster` executable and the run database.
struct PlanCommand {
  QString ringmaster;
  QString db_path;
};

// The arguments of `ringmaster --db DB plan SPEC --json --top K [--trials T --trial-steps N]`
// (trials 0: none). The top K marked are the layouts "Run trials" would run.
QStringList planArguments(const PlanCommand& command, const QString& spec_path, int top, int trials,
                          int trial_steps);

class PlanView : public QDialog {
  Q_OBJECT

 public:
  PlanView(PlanCommand command, nlohmann::json document, QWidget* parent = nullptr);
  ~PlanView() override;  // a plan still running is stopped (SIGTERM, then SIGKILL) and waited for

  // Runs the plan on the spec the window was opened with (trials: also `--trials trials`), the
  // top trialsBox() marked; false with statusText() when it cannot start.
  bool startPlan(int trials = 0);
  // SIGTERM to the command (its sweep's trials stop with it), SIGKILL when it has not ended
  // within a grace period.
  void cancel();
  bool running() const { return process_.state() != QProcess::NotRunning; }
  qint64 pid() const { return pid_; }

  // The last plan read (nullopt before one ended well).
  const std::optional<PlanResult>& result() const { return result_; }
  QString statusText() const;
  QString droppedText() const;
  QString trialsSummaryText() const;
  PlanLayoutModel* layoutsModel() const { return layouts_; }
  TrialTermsModel* trialsModel() const { return trial_terms_; }
  QTableView* layoutsTable() const { return layouts_table_; }
  QSpinBox* trialsBox() const { return trials_box_; }
  QSpinBox* trialStepsBox() const { return trial_steps_box_; }
  QPushButton* planButton() const { return plan_button_; }
  QPushButton* trialsButton() const { return trials_button_; }
  QPushButton* cancelButton() const { return cancel_button_; }
  QPushButton* useButton() const { return use_button_; }
  QPushButton* launchBestButton() const { return launch_best_button_; }
  // The layout selected in the table (nullptr for none).
  const PlanLayoutRow* selectedLayout() const;

 signals:
  // "Use this layout": apply these overrides to the editor's spec.
  void useLayout(const nlohmann::json& overrides);
  // "Launch best": run the spec with these overrides, as the editor's Launch does.
  void launchLayout(const nlohmann::json& overrides);
  // The command ended (exit code; the result read or the reason in statusText()).
  void planFinished(int exit_code);

 private:
  QWidget* buildControls();
  void processEnded(int exit_code, QProcess::ExitStatus status);
  void showResult();
  void showStatus(const QString& text, bool error = false);
  void refreshButtons();

  PlanCommand command_;
  nlohmann::json document_;
  QProcess process_;
  qint64 pid_ = 0;
  std::unique_ptr<QTemporaryDir> work_dir_;
  QTimer kill_timer_;
  std::optional<PlanResult> result_;

  PlanLayoutModel* layouts_ = nullptr;
  QSortFilterProxyModel* sorted_ = nullptr;
  TrialTermsModel* trial_terms_ = nullptr;
  QTableView* layouts_table_ = nullptr;
  QTableView* trials_table_ = nullptr;
  QLabel* status_ = nullptr;
  QPlainTextEdit* dropped_ = nullptr;
  QLabel* trials_summary_ = nullptr;
  QSpinBox* trials_box_ = nullptr;
  QSpinBox* trial_steps_box_ = nullptr;
  QPushButton* plan_button_ = nullptr;
  QPushButton* trials_button_ = nullptr;
  QPushButton* cancel_button_ = nullptr;
  QPushButton* use_button_ = nullptr;
  QPushButton* launch_best_button_ = nullptr;
};

}  // namespace ringmaster::ui
