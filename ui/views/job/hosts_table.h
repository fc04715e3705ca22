// The job editor's hosts table: launch.hosts, a row per host and a column per host field of the
// spec's description (spec_fields.h's "launch.hosts[]." entries: a check box for a boolean, text
// otherwise), Add host (the default list's entry) and Remove host, and the parser's problems with
// the hosts under it. It shows a hosts list and gives one back; the editor writes the document.
#pragma once

#include <QWidget>
#include <nlohmann/json.hpp>

#include "spec/spec_fields.h"

class QTableWidget;

namespace ringmaster::ui {

class OneLineLabel;

class HostsTable : public QWidget {
  Q_OBJECT

 public:
  // `hosts_field`: launch.hosts's description (its default gives a new row).
  explicit HostsTable(const SpecField& hosts_field, QWidget* parent = nullptr);

  // Shows a hosts list (none: no row).
  void showHosts(const nlohmann::json* hosts);
  // The list the rows hold: a host field with a default or required is always written, the
  // others only when filled in (a check box when checked).
  nlohmann::json hosts() const;
  void setError(const QString& text);
  QString errorText() const;
  QTableWidget* table() const { return hosts_; }

 signals:
  // The user changed a cell, or added or removed a host.
  void edited();

 private:
  bool updating_ = false;
  QTableWidget* hosts_ = nullptr;
  OneLineLabel* hosts_error_ = nullptr;
};

}  // namespace ringmaster::ui
