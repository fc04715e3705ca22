// HostsTable: launch.hosts as a table, a column per host field of the spec's description.
#include "views/job/hosts_table.h"

#include <QHBoxLayout>
#include <QHeaderView>
#include <QLabel>
#include <QPushButton>
#include <QTableWidget>
#include <QVBoxLayout>

#include "views/job/spec_document.h"
#include "widgets/one_line_label.h"

namespace ringmaster::ui {

namespace {

// The fields of one launch host (the "launch.hosts[]." entries), one hosts-table column each,
// with the key they have in a host object.
std::vector<std::pair<std::string, const SpecField*>> hostColumns() {
  static const std::string kPrefix = "launch.hosts[].";
  std::vector<std::pair<std::string, const SpecField*>> columns;
  for (const SpecField& field : specFields())
    if (field.path.starts_with(kPrefix))
      columns.emplace_back(field.path.substr(kPrefix.size()), &field);
  return columns;
}

// Row `row` of the hosts table from a host object: text cells, and a check box for a boolean.
void fillHostRow(QTableWidget* hosts, int row, const nlohmann::json& host) {
  const auto columns = hostColumns();
  for (size_t c = 0; c < columns.size(); ++c) {
    const auto& [key, field] = columns[c];
    const nlohmann::json* value = host.is_object() && host.contains(key) ? &host[key] : nullptr;
    auto* item = new QTableWidgetItem();
    if (field->type == FieldType::kBoolean) {
      item->setFlags(Qt::ItemIsUserCheckable | Qt::ItemIsEnabled | Qt::ItemIsSelectable);
      item->setCheckState(value && *value == true ? Qt::Checked : Qt::Unchecked);
    } else if (value) {
      item->setText(textOf(*value));
    }
    hosts->setItem(row, static_cast<int>(c), item);
  }
}

}  // namespace

HostsTable::HostsTable(const SpecField& hosts_field, QWidget* parent) : QWidget(parent) {
  const auto columns = hostColumns();
  auto* layout = new QVBoxLayout(this);
  layout->setContentsMargins(0, 0, 0, 0);
  hosts_ = new QTableWidget(0, static_cast<int>(columns.size()));
  hosts_->setObjectName("hostsTable");
  for (size_t c = 0; c < columns.size(); ++c) {
    const SpecField& column = *columns[c].second;
    auto* header = new QTableWidgetItem(QString::fromStdString(column.label));
    if (column.type == FieldType::kBoolean) header->setToolTip(QString::fromStdString(column.help));
    hosts_->setHorizontalHeaderItem(static_cast<int>(c), header);
  }
  hosts_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  hosts_->horizontalHeader()->setSectionResizeMode(0, QHeaderView::Stretch);
  hosts_->verticalHeader()->hide();
  hosts_->setMinimumHeight(90);
  layout->addWidget(hosts_);
  auto* host_buttons = new QHBoxLayout();
  auto* add = new QPushButton("Add host");
  auto* remove = new QPushButton("Remove host");
  host_buttons->addWidget(add);
  host_buttons->addWidget(remove);
  host_buttons->addStretch(1);
  layout->addLayout(host_buttons);
  // One line, there when empty: the hosts' problems move no field below (all of them on hover).
  hosts_error_ = new OneLineLabel();
  hosts_error_->setObjectName("hostsError");
  hosts_error_->setStyleSheet("color: #b3261e; font-size: small;");
  layout->addWidget(hosts_error_);
  connect(hosts_, &QTableWidget::itemChanged, this, [this] {
    if (!updating_) emit edited();
  });
  // A new host is the default list's entry (localhost, 1 rank).
  const nlohmann::json fresh = hosts_field.default_value.at(0);
  connect(add, &QPushButton::clicked, this, [this, fresh] {
    updating_ = true;
    const int row = hosts_->rowCount();
    hosts_->insertRow(row);
    fillHostRow(hosts_, row, fresh);
    updating_ = false;
    emit edited();
  });
  connect(remove, &QPushButton::clicked, this, [this] {
    if (hosts_->rowCount() == 0) return;
    hosts_->removeRow(hosts_->currentRow() >= 0 ? hosts_->currentRow() : hosts_->rowCount() - 1);
    emit edited();
  });
}

void HostsTable::showHosts(const nlohmann::json* hosts) {
  updating_ = true;
  hosts_->setRowCount(0);
  if (hosts && hosts->is_array()) {
    for (const auto& host : *hosts) {
      const int row = hosts_->rowCount();
      hosts_->insertRow(row);
      fillHostRow(hosts_, row, host);
    }
  }
  // A bastion is rare: its column is shown once a host has one (written in the JSON text), so
  // that a narrow form keeps the hosts' ranks in view.
  const auto columns = hostColumns();
  for (size_t c = 0; c < columns.size(); ++c) {
    if (columns[c].first != "proxy_jump") continue;
    bool used = false;
    if (hosts && hosts->is_array())
      for (const auto& host : *hosts) used |= host.is_object() && host.contains("proxy_jump");
    hosts_->setColumnHidden(static_cast<int>(c), !used);
  }
  updating_ = false;
}

nlohmann::json HostsTable::hosts() const {
  // A host field with a default or required is always written; the others only when filled in
  // (a check box when checked).
  const auto columns = hostColumns();
  nlohmann::json hosts = nlohmann::json::array();
  for (int r = 0; r < hosts_->rowCount(); ++r) {
    nlohmann::json host = nlohmann::json::object();
    for (size_t c = 0; c < columns.size(); ++c) {
      const auto& [key, field] = columns[c];
      const QTableWidgetItem* item = hosts_->item(r, static_cast<int>(c));
      if (field->type == FieldType::kBoolean) {
        if (item && item->checkState() == Qt::Checked) host[key] = true;
        continue;
      }
      const QString text = item ? item->text().trimmed() : QString();
      if (text.isEmpty() && !field->required && field->default_value.is_null()) continue;
      const bool numeric = field->type == FieldType::kInteger || field->type == FieldType::kNumber;
      host[key] = numeric ? valueFromText(text) : nlohmann::json(text.toStdString());
    }
    hosts.push_back(std::move(host));
  }
  return hosts;
}

void HostsTable::setError(const QString& text) {
  hosts_error_->setMessage(text);
}

QString HostsTable::errorText() const {
  return hosts_error_->text();
}

}  // namespace ringmaster::ui
