// HostsView: a table of hosts and checkHost on a worker thread per check.
#include "views/hosts_view.h"

#include <QCoreApplication>
#include <QFutureWatcher>
#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QLineEdit>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>
#include <QtConcurrent/QtConcurrentRun>

#include "core/error.h"
#include "models/format.h"
#include "models/untrusted_text.h"
#include "views/table_copy.h"

namespace ringmaster::ui {

HostsView::HostsView(QWidget* parent) : HostsView(Paths{}, parent) {}

HostsView::HostsView(Paths paths, QWidget* parent)
    : QWidget(parent), paths_(std::move(paths)), questions_(dialogQuestions(this)) {
  if (paths_.ssh_config.empty()) paths_.ssh_config = defaultSshConfigPath();
  if (paths_.known_hosts.empty()) paths_.known_hosts = defaultKnownHostsPath();
  if (paths_.node_binary.empty())
    paths_.node_binary =
        (QCoreApplication::applicationDirPath() + "/ringmaster-node").toStdString();
  auto* layout = new QVBoxLayout(this);
  auto* where = new QLabel(QString("Hosts of <tt>%1</tt> and hosts added here. Keys are "
                                   "checked against <tt>%2</tt>.")
                               .arg(QString::fromStdString(paths_.ssh_config).toHtmlEscaped(),
                                    QString::fromStdString(paths_.known_hosts).toHtmlEscaped()));
  where->setWordWrap(true);  // a long home directory does not widen the window
  layout->addWidget(where);
  auto* bar = new QHBoxLayout();
  add_ = new QLineEdit();
  add_->setObjectName("addHost");
  add_->setPlaceholderText("[user@]host[:port] or an alias");
  auto* add_button = new QPushButton("Add");
  auto* check = new QPushButton("Test connection");
  check->setObjectName("testConnection");
  check->setToolTip("Connect to the selected hosts (host key verified) and show what they offer");
  auto* reload = new QPushButton("Reload ~/.ssh/config");
  bar->addWidget(add_, 1);
  bar->addWidget(add_button);
  bar->addWidget(check);
  bar->addWidget(reload);
  layout->addLayout(bar);
  table_ = new QTableWidget(0, kColumnCount);
  table_->setObjectName("hostsList");
  table_->setHorizontalHeaderLabels(
      {"Host", "Status", "Host key", "ringmaster-node", "CPUs", "Memory", "GPUs"});
  table_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  table_->horizontalHeader()->setStretchLastSection(true);
  table_->verticalHeader()->hide();
  table_->setSelectionBehavior(QAbstractItemView::SelectRows);
  table_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  table_->setAlternatingRowColors(true);
  enableCsvCopy(table_);
  layout->addWidget(table_, 1);
  connect(add_button, &QPushButton::clicked, this, [this] {
    if (addHost(add_->text()) >= 0) add_->clear();
  });
  connect(add_, &QLineEdit::returnPressed, add_button, &QPushButton::click);
  connect(check, &QPushButton::clicked, this, [this] {
    for (const QModelIndex& index : table_->selectionModel()->selectedRows())
      checkHost(index.row());
  });
  connect(table_, &QTableWidget::cellDoubleClicked, this, [this](int row) { checkHost(row); });
  connect(reload, &QPushButton::clicked, this, &HostsView::reloadConfig);
  reloadConfig();
}

HostsView::~HostsView() {
  // A check in flight holds `this` in its callbacks.
  while (running_ > 0) QCoreApplication::processEvents(QEventLoop::AllEvents, 50);
}

void HostsView::reloadConfig() {
  for (const std::string& alias : sshConfigAliases(paths_.ssh_config)) {
    bool known = false;
    for (const auto& host : hosts_) known = known || host.host == alias;
    if (!known) {
      LaunchHostSpec spec;
      spec.host = alias;
      addRow(untrustedLine(alias), spec);
    }
  }
}

int HostsView::addRow(const QString& host, const LaunchHostSpec& spec) {
  const int row = table_->rowCount();
  table_->insertRow(row);
  table_->setItem(row, kHost, new QTableWidgetItem(host));
  for (int c = 1; c < kColumnCount; ++c) table_->setItem(row, c, new QTableWidgetItem());
  table_->item(row, kStatus)->setText("not checked");
  hosts_.push_back(spec);
  reports_.emplace_back();
  return row;
}

int HostsView::addHost(const QString& text) {
  try {
    const LaunchHostSpec spec = parseHostArgument(text.trimmed().toStdString());
    resolveSshTarget(spec, paths_.ssh_config);  // validates names and any ProxyJump
    return addRow(text.trimmed(), spec);
  } catch (const Error& e) {
    add_->setToolTip(richTextShowingPlain(untrustedBlock(e.message())));
    add_->setStyleSheet("QLineEdit { border: 1px solid #b3261e; }");
    return -1;
  }
}

void HostsView::checkHost(int row) {
  if (row < 0 || row >= static_cast<int>(hosts_.size())) return;
  table_->item(row, kStatus)->setText("connecting…");
  ++running_;
  const LaunchHostSpec spec = hosts_[static_cast<size_t>(row)];
  const SshConnectOptions options = guiConnectOptions(this, questions_, paths_.known_hosts);
  const std::string config = paths_.ssh_config, node = paths_.node_binary;
  auto* watcher = new QFutureWatcher<HostReport>(this);
  connect(watcher, &QFutureWatcher<HostReport>::finished, this, [this, watcher, row] {
    reports_[static_cast<size_t>(row)] = watcher->result();
    watcher->deleteLater();
    --running_;
    showReport(row);
    emit hostChecked(row);
  });
  watcher->setFuture(QtConcurrent::run([spec, options, config, node] {
    try {
      return ringmaster::checkHost(resolveSshTarget(spec, config), options, node);
    } catch (const Error& e) {
      HostReport report;
      report.error = e.message();
      return report;
    }
  }));
}

void HostsView::showReport(int row) {
  const HostReport& r = reports_[static_cast<size_t>(row)];
  auto set = [&](int column, const QString& text) { table_->item(row, column)->setText(text); };
  if (!r.error.empty()) {
    set(kStatus, "failed");
    table_->item(row, kStatus)->setForeground(QColor(0xb3, 0x26, 0x1e));
    table_->item(row, kStatus)->setToolTip(richTextShowingPlain(untrustedBlock(r.error)));
    set(kFingerprint, untrustedMessageLine(r.error));
    return;
  }
  set(kStatus, "reachable");
  table_->item(row, kStatus)->setForeground(QColor(0x2c, 0xa0, 0x2c));
  table_->item(row, kStatus)
      ->setToolTip(richTextShowingPlain(untrustedBlock(describeTarget(r.target))));
  set(kFingerprint, untrustedLine(r.fingerprint));
  set(kNode, r.node_version.empty() ? QString("not found (uploaded at launch)")
                                    : untrustedLine(r.node_version) +
                                          (r.node_matches ? "" : " (differs: uploaded at launch)"));
  set(kCpus, QString::number(r.cpus));
  set(kMemory, formatBytes(static_cast<double>(r.memory_bytes)));
  QStringList gpus;
  for (const auto& gpu : r.gpus)
    gpus << QString("%1 (%2 GiB)")
                .arg(untrustedLine(gpu.name))
                .arg(gpu.memory_mib / 1024.0, 0, 'f', 0);
  set(kGpus, gpus.isEmpty() ? QString("none") : gpus.join(", "));
}

}  // namespace ringmaster::ui
