// The hosts a job can run on: every alias of ~/.ssh/config plus hosts added by hand
// ([user@]host[:port]), each with a test-connection action that verifies the host key (asking
// about an unknown one, refusing a changed one) and shows the fingerprint, the ringmaster-node
// found there, CPUs, memory and GPUs. Connections run off the GUI thread.
#pragma once

#include <QWidget>
#include <string>
#include <vector>

#include "ssh/host_check.h"
#include "views/ssh_dialogs.h"

class QLineEdit;
class QTableWidget;

namespace ringmaster::ui {

class HostsView : public QWidget {
  Q_OBJECT

 public:
  enum Column { kHost, kStatus, kFingerprint, kNode, kCpus, kMemory, kGpus, kColumnCount };

  struct Paths {
    std::string ssh_config;   // default ~/.ssh/config
    std::string known_hosts;  // default ~/.ssh/known_hosts
    std::string node_binary;  // ringmaster-node on the hosts; default: this build's path
  };
  explicit HostsView(QWidget* parent = nullptr);
  HostsView(Paths paths, QWidget* parent);
  ~HostsView() override;

  // Re-reads the aliases of the ssh config (hosts added by hand stay).
  void reloadConfig();
  // Adds "[user@]host[:port]" or an alias; false (with the reason in the row) for a bad name.
  int addHost(const QString& text);
  // Connects to the host of `row` in the background; hostChecked(row) when done.
  void checkHost(int row);
  void setQuestions(SshQuestions questions) { questions_ = std::move(questions); }
  QTableWidget* table() const { return table_; }
  const std::vector<HostReport>& reports() const { return reports_; }
  int checksRunning() const { return running_; }

 signals:
  void hostChecked(int row);

 private:
  void showReport(int row);
  int addRow(const QString& host, const LaunchHostSpec& spec);

  Paths paths_;
  SshQuestions questions_;
  std::vector<LaunchHostSpec> hosts_;
  std::vector<HostReport> reports_;
  QTableWidget* table_ = nullptr;
  QLineEdit* add_ = nullptr;
  int running_ = 0;
};

}  // namespace ringmaster::ui
