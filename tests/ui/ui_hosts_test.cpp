// The hosts list against a real OpenSSH sshd on 127.0.0.1: the aliases of the ssh config are
// listed, an unknown host key is shown with its fingerprint and asked about (refused: nothing
// recorded; accepted: recorded and known from then on), a changed key is refused with both
// fingerprints, and a checked host shows its key, ringmaster-node, CPUs and memory.
#include <QApplication>
#include <QSignalSpy>
#include <QTableWidget>
#include <QTest>
#include <QThreadPool>
#include <filesystem>
#include <fstream>

#include "common/test_paths.h"
#include "main_window.h"
#include "models/rank_table_model.h"
#include "common/sshd_server.h"
#include "views/hosts_view.h"
#include "views/run_view.h"

using namespace ringmaster;
using namespace ringmaster::ui;
namespace fs = std::filesystem;

class UiHostsTest : public QObject {
  Q_OBJECT

 private:
  QTemporaryDir dir_;
  std::unique_ptr<ringmaster::testing::SshdServer> server_;
  fs::path config_, known_hosts_;
  QStringList asked_;
  bool trust_ = false;

  std::unique_ptr<HostsView> makeView() {
    HostsView::Paths paths{config_.string(), known_hosts_.string(),
                           std::string(ringmaster::testBinaryDir()) + "/app/ringmaster-node"};
    auto view = std::make_unique<HostsView>(paths, nullptr);
    view->setQuestions({[this](const QString& host, const QString& fingerprint) {
                          asked_ << host + " " + fingerprint;
                          return trust_;
                        },
                        [](const QString&) { return std::optional<QString>(); }});
    return view;
  }

  QString checked(HostsView& view, int row, int column) {
    QSignalSpy done(&view, &HostsView::hostChecked);
    view.checkHost(row);
    if (!done.wait(30000)) return "timed out";
    return view.table()->item(row, column)->text();
  }

 private slots:
  void initTestCase() {
    if (const std::string why = ringmaster::testing::sshdUnavailable(); !why.empty())
      QSKIP(why.c_str());
    const fs::path dir = dir_.path().toStdString();
    ringmaster::testing::makeKey(dir / "id_user");
    server_ = std::make_unique<ringmaster::testing::SshdServer>(dir / "sshd", dir / "id_user.pub");
    config_ = dir / "ssh_config";
    known_hosts_ = dir / "known_hosts";
    std::ofstream(config_) << "Host gpu-box\n  HostName 127.0.0.1\n  Port " << server_->port()
                           << "\n  User root\n  IdentityFile " << (dir / "id_user").string()
                           << "\nHost *.cluster !bad\n  User nobody\n";
  }

  void cleanupTestCase() {
    // Join the pool threads that ran the checks, so that OpenSSL's per-thread state (libssh's)
    // is freed before LeakSanitizer looks.
    QThreadPool::globalInstance()->waitForDone();
    server_.reset();
  }

  void theConfigsAliasesAreListed() {
    auto view = makeView();
    QCOMPARE(view->table()->rowCount(), 1);  // patterns are not hosts
    QCOMPARE(view->table()->item(0, HostsView::kHost)->text(), QString("gpu-box"));
    QCOMPARE(view->addHost("bad host;rm -rf /"), -1);
    QCOMPARE(view->addHost("alice@10.0.0.7:2222"), 1);
  }

  void anUnknownKeyIsAskedAboutAndRefusedRecordsNothing() {
    auto view = makeView();
    trust_ = false;
    asked_.clear();
    const QString status = checked(*view, 0, HostsView::kStatus);
    QCOMPARE(status, QString("failed"));
    QCOMPARE(asked_.size(), 1);
    QVERIFY2(asked_[0].contains(QString::fromStdString(server_->hostKeyFingerprint())),
             qPrintable(asked_[0]));
    QVERIFY(!fs::exists(known_hosts_) || fs::file_size(known_hosts_) == 0);
  }

  void anAcceptedKeyIsRecordedAndTheHostShowsWhatItOffers() {
    auto view = makeView();
    trust_ = true;
    asked_.clear();
    QCOMPARE(checked(*view, 0, HostsView::kStatus), QString("reachable"));
    QCOMPARE(asked_.size(), 1);
    QCOMPARE(view->table()->item(0, HostsView::kFingerprint)->text(),
             QString::fromStdString(server_->hostKeyFingerprint()));
    QVERIFY(view->table()->item(0, HostsView::kNode)->text().startsWith("ringmaster-node"));
    QVERIFY(view->table()->item(0, HostsView::kCpus)->text().toInt() >= 1);
    QVERIFY(view->table()->item(0, HostsView::kMemory)->text().endsWith("B"));
    // Known from now on: no question the second time.
    asked_.clear();
    QCOMPARE(checked(*view, 0, HostsView::kStatus), QString("reachable"));
    QVERIFY(asked_.isEmpty());
  }

  void aJobLaunchedOverSshAsksAboutTheUnknownKeyThenRuns() {
    // The window's launch onto "gpu-box" of ~/.ssh/config (HOME points at a scratch directory):
    // the unknown key is asked about in the window before `ringmaster run` connects with it.
    const fs::path home = fs::path(dir_.path().toStdString()) / "home";
    fs::create_directories(home / ".ssh");
    fs::copy_file(config_, home / ".ssh" / "config");
    qputenv("HOME", QByteArray::fromStdString(home.string()));
    MainWindow window({(home / "runs.db").string(),
                       QString::fromUtf8(ringmaster::testBinaryDir()) + "/app/ringmaster",
                       "ringmaster-hosts-test"});
    asked_.clear();
    trust_ = true;
    window.setSshQuestions({[this](const QString& host, const QString& fingerprint) {
                              asked_ << host + " " + fingerprint;
                              return trust_;
                            },
                            [](const QString&) { return std::optional<QString>(); }});
    nlohmann::json spec = nlohmann::json::parse(R"({
      "name": "over_ssh", "strategy": {"kind": "ddp"},
      "model": {"kind": "mlp", "layers": [16, 8, 4]},
      "data": {"kind": "synthetic", "samples": 256, "features": 16, "classes": 4},
      "train": {"steps": 8, "batch_size": 8}, "optimizer": {"kind": "sgd", "lr": 0.1},
      "device": "cpu", "telemetry": {"every_steps": 1},
      "launch": {"hosts": [{"host": "gpu-box", "ranks": 2}]}})");
    QSignalSpy finished(&window, &MainWindow::launchFinished);
    QVERIFY(window.launch(spec));
    QVERIFY2(finished.wait(120000), "the launch over SSH never ended");
    QCOMPARE(asked_.size(), 1);
    QVERIFY2(asked_[0].contains(QString::fromStdString(server_->hostKeyFingerprint())),
             qPrintable(asked_[0]));
    QCOMPARE(finished.first().at(1).toInt(), 0);
    RunView* view = window.openRun(finished.first().at(0).toLongLong());
    QTRY_COMPARE_WITH_TIMEOUT(view->statusText(), QString("completed"), 10000);
    QTRY_COMPARE_WITH_TIMEOUT(view->rankModel()->rowCount(), 2, 10000);
    QCOMPARE(view->rankModel()->index(1, RankTableModel::kLastStep).data().toLongLong(), 8);
  }

  void aChangedKeyIsRefusedWithBothFingerprints() {
    const std::string old_fingerprint = server_->hostKeyFingerprint();
    server_->replaceHostKey();
    auto view = makeView();
    trust_ = true;  // not even asked
    asked_.clear();
    QCOMPARE(checked(*view, 0, HostsView::kStatus), QString("failed"));
    const QString error = view->table()->item(0, HostsView::kFingerprint)->text();
    QVERIFY2(error.contains(QString::fromStdString(old_fingerprint)) &&
                 error.contains(QString::fromStdString(server_->hostKeyFingerprint())),
             qPrintable(error));
    QVERIFY(asked_.isEmpty());
  }
};

QTEST_MAIN(UiHostsTest)
#include "ui_hosts_test.moc"
