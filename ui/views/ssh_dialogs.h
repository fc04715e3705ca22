// SSH's questions asked in the window: a host key not yet in known_hosts is shown with its SHA-256
// fingerprint and the user decides (a changed key never gets here: the session refuses it with
// both fingerprints), and passphrases and passwords are typed in a password dialog, never kept.
// The callbacks may be called from any thread; they ask on the GUI thread and wait.
#pragma once

#include <QString>
#include <functional>

#include "ssh/ssh_session.h"

class QObject;
class QWidget;

namespace ringmaster::ui {

// What the dialogs ask; tests replace them with scripted answers.
struct SshQuestions {
  std::function<bool(const QString& host, const QString& fingerprint)> trust_new_key;
  std::function<std::optional<QString>(const QString& prompt)> secret;
};

// The dialogs, parented to `parent`.
SshQuestions dialogQuestions(QWidget* parent);

// Connect options whose callbacks ask `questions` on `context`'s thread.
SshConnectOptions guiConnectOptions(QObject* context, const SshQuestions& questions,
                                    const std::string& known_hosts_path);

}  // namespace ringmaster::ui
