#include <QTest>
#include <QDockWidget>
#include <QTemporaryDir>
#include <QLayout>
#include <QSettings>
#include "main_window.h"
#include "views/job_editor.h"
#include "ui_test_support.h"
using namespace ringmaster::ui;
void dump(QWidget* w, int depth) {
  if (depth > 9) return;
  const QSize m = w->minimumSizeHint();
  const QSize mm = w->minimumSize();
  if (m.width() > 200 || mm.width() > 200)
    qInfo("%*s%s %s msh=%dx%d min=%dx%d sh=%dx%d", depth * 2, "", w->metaObject()->className(),
          qPrintable(w->objectName()), m.width(), m.height(), mm.width(), mm.height(),
          w->sizeHint().width(), w->sizeHint().height());
  for (QObject* c : w->children())
    if (auto* cw = qobject_cast<QWidget*>(c)) dump(cw, depth + 1);
}
class Probe : public QObject {
  Q_OBJECT
 private slots:
  void probe() {
    QTemporaryDir dir;
    QSettings("ringmaster", "probe").clear();
    MainWindow w({dir.filePath("runs.db").toStdString(), "ringmaster", "probe"});
    w.resize(1366, 768);
    w.show();
    QVERIFY(QTest::qWaitForWindowExposed(&w));
    QTest::qWait(200);
    qInfo("window %dx%d msh %dx%d", w.width(), w.height(), w.minimumSizeHint().width(), w.minimumSizeHint().height());
    dump(&w, 0);
    w.grab().save("/tmp/probe/main.png");
  }
};
QTEST_MAIN(Probe)
#include "ui_window_fit_test.moc"
