// The dialogs behind SshQuestions, and the thread hop to ask them.
#include "views/ssh_dialogs.h"

#include <QInputDialog>
#include <QLineEdit>
#include <QMessageBox>
#include <QMetaObject>
#include <QThread>

namespace ringmaster::ui {

namespace {

// Runs `ask` on `context`'s thread and waits for its answer.
template <typename T>
T askOn(QObject* context, const std::function<T()>& ask) {
  if (QThread::currentThread() == context->thread()) return ask();
  T answer{};
  QMetaObject::invokeMethod(
      context, [&] { answer = ask(); }, Qt::BlockingQueuedConnection);
  return answer;
}

}  // namespace

SshQuestions dialogQuestions(QWidget* parent) {
  SshQuestions questions;
  questions.trust_new_key = [parent](const QString& host, const QString& fingerprint) {
    QMessageBox box(QMessageBox::Question, "Unknown host key",
                    QString("%1 is not in known_hosts.\n\nIts key fingerprint is\n%2\n\nCompare it "
                            "with the one the host's administrator gives you. Trust this key and "
                            "record it?")
                        .arg(host, fingerprint),
                    QMessageBox::Yes | QMessageBox::No, parent);
    box.setDefaultButton(QMessageBox::No);
    return box.exec() == QMessageBox::Yes;
  };
  questions.secret = [parent](const QString& prompt) -> std::optional<QString> {
    bool ok = false;
    const QString text = QInputDialog::getText(parent, "SSH", prompt, QLineEdit::Password, {}, &ok);
    if (!ok) return std::nullopt;
    return text;
  };
  return questions;
}

SshConnectOptions guiConnectOptions(QObject* context, const SshQuestions& questions,
                                    const std::string& known_hosts_path) {
  SshConnectOptions options;
  options.known_hosts_path = known_hosts_path;
  options.accept_unknown_key = [context, questions](const SshTarget& target,
                                                    const std::string& fingerprint) {
    return askOn<bool>(context, [&] {
      return questions.trust_new_key(QString::fromStdString(describeTarget(target)),
                                     QString::fromStdString(fingerprint));
    });
  };
  auto secret = [context, questions](const QString& prompt) -> std::optional<std::string> {
    auto answer = askOn<std::optional<QString>>(context, [&] { return questions.secret(prompt); });
    if (!answer) return std::nullopt;
    return answer->toStdString();
  };
  options.passphrase = [secret](const std::string& identity_file) {
    return secret(QString("Passphrase for %1:").arg(QString::fromStdString(identity_file)));
  };
  options.password = [secret](const SshTarget& target) {
    return secret(
        QString("Password for %1@%2:")
            .arg(QString::fromStdString(target.user), QString::fromStdString(target.hostname)));
  };
  return options;
}

}  // namespace ringmaster::ui
