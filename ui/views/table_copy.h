// Tables copy as CSV: Ctrl+C and a context-menu action put the selected rows (or all rows when
// nothing is selected) on the clipboard with a header line.
#pragma once

class QTableView;
class QString;

namespace ringmaster::ui {

void enableCsvCopy(QTableView* table);
// The CSV the copy produces (exposed for the tests).
QString tableAsCsv(const QTableView& table);

}  // namespace ringmaster::ui
