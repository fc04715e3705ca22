// The run view's header: the run's title and status (and a scheduler's job beside it: issue 35),
// its progress (steps of those planned, an ETA), the summary figures, a "Cancel run…" button, and
// two banners: the root cause of a failure and the live hang view's diagnosis
// (storage/query/hang.h). It draws a snapshot; it reads nothing.
#pragma once

#include <QStringList>
#include <QWidget>

#include "data/run_snapshot.h"

class QLabel;
class QProgressBar;
class QPushButton;

namespace ringmaster::ui {

class RunHeader : public QWidget {
  Q_OBJECT

 public:
  explicit RunHeader(int64_t run_id, QWidget* parent = nullptr);

  void apply(const RunSnapshot& snapshot);
  // A database that cannot be read, in the root-cause banner.
  void showReadError(const QString& error);
  void setCancelVisible(bool visible);

  QString statusText() const;
  // The run's scheduler job ("Slurm 4242: PENDING (Resources)"); empty for a run not handed to one.
  QString schedulerText() const;
  QString rootCauseText() const;  // empty when hidden
  QString hangText() const;       // empty when hidden
  QString figuresText() const;
  QString progressText() const;

 signals:
  void cancelClicked();

 private:
  void applyTitle(const RunSnapshot& s);
  void applyProgress(const RunSnapshot& s);
  static QStringList figures(const RunSnapshot& s);
  void applyBanners(const RunSnapshot& s);
  static QString errorOutputHtml(const std::vector<std::string>& lines);

  QLabel* title_ = nullptr;
  QLabel* status_ = nullptr;
  QLabel* scheduler_ = nullptr;
  QLabel* figures_ = nullptr;
  QLabel* root_cause_ = nullptr;
  QLabel* hang_ = nullptr;  // the live hang view's diagnosis, while the run is running
  QProgressBar* progress_ = nullptr;
  QLabel* progress_text_ = nullptr;
  QPushButton* cancel_ = nullptr;
};

}  // namespace ringmaster::ui
