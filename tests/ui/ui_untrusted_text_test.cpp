// Untrusted text in the window (issue 16, finding 6): a run whose worker sent a host, a device, an
// op name, a log line and an error holding ESC[2J, U+009B, U+202E and "<b>" shows each only as
// visible escapes, in the rank table, the run list, the root-cause banner, the logs and the
// tooltips; and "<b>" in untrusted text is never rendered as rich text.
#include <QApplication>
#include <QLabel>
#include <QPlainTextEdit>
#include <QTemporaryDir>
#include <QTest>
#include <QTextDocument>

#include "core/display_text.h"
#include "data/background_jobs.h"
#include "db/database.h"
#include "models/rank_table_model.h"
#include "models/run_list_model.h"
#include "models/untrusted_text.h"
#include "query/runs.h"
#include "recorder/recorder.h"
#include "telemetry/events.h"
#include "views/run_view.h"

using namespace ringmaster;
using namespace ringmaster::ui;

namespace {

const std::string kHostile =
    "boom\x1b[2J \xC2\x9B"
    "31m \xE2\x80\xAE"
    "cod.exe <b>bold</b>";
const QString kEscaped = "boom\\x1b[2J \\u009b31m \\u202ecod.exe <b>bold</b>";

// Whether `text` holds a control, C1 or bidi character that displaySafe escapes.
bool holdsRawControls(const QString& text) {
  for (const QChar c : text) {
    const char16_t u = c.unicode();
    if ((u < 0x20 && u != '\n' && u != '\t') || (u >= 0x7F && u <= 0x9F) || u == 0x202E)
      return true;
  }
  return false;
}

// The text a rich-text string renders as.
QString rendered(const QString& rich) {
  QTextDocument document;
  document.setHtml(rich);
  return document.toPlainText();
}

}  // namespace

class UiUntrustedTextTest : public QObject {
  Q_OBJECT

 private slots:
  void initTestCase() {
    QVERIFY(dir_.isValid());
    db_ = dir_.filePath("runs.db").toStdString();
    installGuiThreadQueryCheck();  // issue 17: the views read off the GUI thread
    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    run_ = storage::createRun(db, {.name = "hostile\xE2\x80\xAE<b>run</b>",
                                   .spec_json = R"({"strategy": {"kind": "single"}})",
                                   .strategy = "single",
                                   .world_size = 1});
    {
      storage::Recorder recorder(db_, run_, 0);
      HelloEvent hello;
      hello.host = "evil\x1b]0;pwned\x07<b>host</b>";
      hello.device = kHostile;
      hello.strategy = "single";
      QVERIFY(recorder.submit({.rank = 0, .seq = 0, .time = 1e9, .body = hello}));
      QVERIFY(recorder.submitLog(0, "error", kHostile + "\r over"));
      recorder.flush();
    }
    storage::recordRunError(db, run_, kHostile);
    storage::finishRun(db, run_, "failed");
  }

  void rankTableAndRunListShowOnlyEscapes() {
    RunView view(db_, run_);
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() != nullptr, 10000);
    RankTableModel* ranks = view.rankModel();
    QVERIFY(ranks->rowCount() >= 1);
    for (int column = 0; column < ranks->columnCount(); ++column) {
      const QString cell = ranks->index(0, column).data().toString();
      QVERIFY2(!holdsRawControls(cell), qPrintable(cell));
    }
    QCOMPARE(ranks->index(0, RankTableModel::kHost).data().toString(),
             QString("evil\\x1b]0;pwned\\x07<b>host</b>"));
    QCOMPARE(ranks->index(0, RankTableModel::kDevice).data().toString(), kEscaped);

    storage::AllowQueriesOnThisThread the_tests_own_queries;
    storage::Database db(db_);
    RunListModel runs;
    runs.setRuns(storage::listRuns(db, {}));
    QCOMPARE(runs.rowCount(), 1);
    QCOMPARE(runs.index(0, RunListModel::kName).data().toString(),
             QString("hostile\\u202e<b>run</b>"));
    // The error's tooltip renders as the text itself, "<b>" included, not as bold.
    const QString tooltip = runs.index(0, RunListModel::kName).data(Qt::ToolTipRole).toString();
    QVERIFY2(Qt::mightBeRichText(tooltip), qPrintable(tooltip));
    QCOMPARE(rendered(tooltip), kEscaped);
  }

  void bannerTitleAndLogsShowTheTextNotRichText() {
    RunView view(db_, run_);
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() != nullptr, 10000);
    auto* banner = view.findChild<QLabel*>("rootCause");
    QVERIFY(banner != nullptr);
    QCOMPARE(banner->textFormat(), Qt::RichText);
    QVERIFY2(rendered(banner->text()).endsWith(": " + kEscaped), qPrintable(banner->text()));
    QVERIFY(!holdsRawControls(banner->text()));
    // The untrusted "<b>" reaches the label escaped: no bold text but the banner's own label.
    QVERIFY2(banner->text().count("<b>") == 1, qPrintable(banner->text()));

    for (QLabel* label : view.findChildren<QLabel*>()) {
      QVERIFY2(!holdsRawControls(label->text()), qPrintable(label->text()));
      if (label->text().contains("hostile")) {
        QVERIFY2(rendered(label->text()).contains("hostile\\u202e<b>run</b>"),
                 qPrintable(label->text()));
      }
    }

    const QString logs = view.logView()->toPlainText();
    QVERIFY2(logs.contains(kEscaped + "\\r over"), qPrintable(logs));
    QVERIFY2(!holdsRawControls(logs), qPrintable(logs));
  }

  // Issue 32, point 7: a 500 KB host name (as an older version stored it whole) fills a rank
  // table cell to a line's bound, with its mark; a log line of 2,000 characters is shown whole.
  void longTextIsBoundedInTheRankTableNotInTheLogs() {
    int64_t run = 0;
    const std::string log_line(2000, 'l');
    {
      storage::AllowQueriesOnThisThread the_tests_own_queries;
      storage::Database db(db_);
      run = storage::createRun(db, {.name = "long",
                                    .spec_json = R"({"strategy": {"kind": "single"}})",
                                    .strategy = "single",
                                    .world_size = 1});
      {
        storage::Recorder recorder(db_, run, 0);
        QVERIFY(recorder.submit({.rank = 0,
                                 .seq = 0,
                                 .time = 1e9,
                                 .body = HelloEvent{.host = "h", .strategy = "single"}}));
        QVERIFY(recorder.submitLog(0, "stderr", log_line));
        recorder.flush();
      }
      db.exec("UPDATE ranks SET host = '" + std::string(500'000, 'h') + "'");
      storage::finishRun(db, run, "completed");
    }
    RunView view(db_, run);
    QTRY_VERIFY_WITH_TIMEOUT(view.snapshot() != nullptr, 10000);
    const QString host = view.rankModel()->index(0, RankTableModel::kHost).data().toString();
    QCOMPARE(host, QString(kMaxDisplayLineChars - 3, 'h') + "...");
    const QString logs = view.logView()->toPlainText();
    QVERIFY2(logs.contains(QString::fromStdString(log_line)), qPrintable(logs.left(200)));
  }

  void helpersEscapeForEachPlace() {
    QCOMPARE(untrustedLine("a\nb\x1b"), QString("a\\nb\\x1b"));
    QCOMPARE(untrustedBlock("a\nb\x1b"), QString("a\nb\\x1b"));
    QCOMPARE(untrustedHtml("<b>\xE2\x80\xAE"), QString("&lt;b&gt;\\u202e"));
    QCOMPARE(rendered(richTextShowingPlain("<b>x</b>\ny")), QString("<b>x</b>\ny"));
  }

 private:
  QTemporaryDir dir_;
  std::string db_;
  int64_t run_ = 0;
};

QTEST_MAIN(UiUntrustedTextTest)
#include "ui_untrusted_text_test.moc"
