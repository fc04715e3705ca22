// runGui and runAskPass: the QApplication around MainWindow and a password dialog.
#include "gui_main.h"

#include <QApplication>
#include <QFile>
#include <QInputDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QStyleFactory>
#include <cstdio>
#include <nlohmann/json.hpp>

#include "data/background_jobs.h"
#include "main_window.h"
#include "models/untrusted_text.h"
#include "views/job_editor.h"

namespace ringmaster::ui {

namespace {

void setUpApplication() {
  QApplication::setApplicationName("Ringmaster");
  QApplication::setOrganizationName("ringmaster");
  if (QStyleFactory::keys().contains("Fusion")) QApplication::setStyle("Fusion");
  QFont font = QApplication::font();
  if (font.pointSizeF() < 9.5) font.setPointSizeF(9.5);
  QApplication::setFont(font);
}

}  // namespace

int runGui(int argc, char** argv, const GuiOptions& options) {
  QApplication app(argc, argv);
  setUpApplication();
#ifndef NDEBUG
  installGuiThreadQueryCheck();  // a query on the GUI thread throws: a bug, found early
#endif
  MainWindow window({options.db_path, QApplication::applicationDirPath() + "/ringmaster"});
  window.show();
  if (options.launch_spec) {
    // A spec with problems stays in the editor, its messages next to the fields.
    if (!window.jobEditor()->loadFile(QString::fromStdString(*options.launch_spec)))
      QMessageBox::critical(
          &window, "Ringmaster",
          richTextShowingPlain(untrustedBlock(window.jobEditor()->lastFileError().toStdString())));
    else if (window.jobEditor()->spec())
      window.launch(window.jobEditor()->document());
  }
  return QApplication::exec();
}

int runAskPass(int argc, char** argv, const std::string& prompt) {
  QApplication app(argc, argv);
  setUpApplication();
  bool ok = false;
  const QString answer = QInputDialog::getText(
      nullptr, "Ringmaster: SSH", QString::fromStdString(prompt), QLineEdit::Password, {}, &ok);
  if (!ok) return 1;
  std::fputs(answer.toUtf8().constData(), stdout);
  std::fputc('\n', stdout);
  return 0;
}

}  // namespace ringmaster::ui
