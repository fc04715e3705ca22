// enableCsvCopy: a QAction on the table with the standard copy shortcut.
#include "views/table_copy.h"

#include <QAction>
#include <QApplication>
#include <QClipboard>
#include <QItemSelectionModel>
#include <QTableView>
#include <set>

namespace ringmaster::ui {

namespace {

QString csvField(QString text) {
  if (text.contains(',') || text.contains('"') || text.contains('\n'))
    text = '"' + text.replace('"', "\"\"") + '"';
  return text;
}

}  // namespace

QString tableAsCsv(const QTableView& table) {
  const QAbstractItemModel* model = table.model();
  if (!model) return {};
  std::set<int> rows;
  if (table.selectionModel())
    for (const QModelIndex& index : table.selectionModel()->selectedIndexes())
      rows.insert(index.row());
  if (rows.empty())
    for (int r = 0; r < model->rowCount(); ++r) rows.insert(r);
  QStringList lines;
  QStringList header;
  for (int c = 0; c < model->columnCount(); ++c)
    header << csvField(model->headerData(c, Qt::Horizontal).toString());
  lines << header.join(',');
  for (int r : rows) {
    QStringList fields;
    for (int c = 0; c < model->columnCount(); ++c)
      fields << csvField(model->index(r, c).data().toString());
    lines << fields.join(',');
  }
  return lines.join('\n') + '\n';
}

void enableCsvCopy(QTableView* table) {
  auto* copy = new QAction("Copy as CSV", table);
  copy->setShortcut(QKeySequence::Copy);
  copy->setShortcutContext(Qt::WidgetWithChildrenShortcut);
  QObject::connect(copy, &QAction::triggered, table,
                   [table] { QApplication::clipboard()->setText(tableAsCsv(*table)); });
  table->addAction(copy);
  table->setContextMenuPolicy(Qt::ActionsContextMenu);
}

}  // namespace ringmaster::ui
