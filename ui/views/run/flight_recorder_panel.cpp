// FlightRecorderPanel: the dumps' summary (the furthest collective, who did not reach it) and a row
// per rank.
#include "views/run/flight_recorder_panel.h"

#include <QHeaderView>
#include <QLabel>
#include <QTableView>
#include <QVBoxLayout>
#include <algorithm>
#include <map>
#include <nlohmann/json.hpp>

#include "models/flight_recorder_model.h"
#include "models/untrusted_text.h"

namespace ringmaster::ui {

FlightRecorderPanel::FlightRecorderPanel(QWidget* parent) : QWidget(parent) {
  auto* recorder_layout = new QVBoxLayout(this);
  recorder_layout->setContentsMargins(0, 0, 0, 0);
  flight_summary_ = new QLabel(
      "<b>Flight recorder</b>: no dump (dumps arrive when a collective "
      "fails or times out)");
  flight_summary_->setObjectName("flightSummary");
  flight_summary_->setTextFormat(Qt::RichText);  // its op names are escaped
  flight_summary_->setWordWrap(true);
  recorder_layout->addWidget(flight_summary_);
  flight_recorder_ = new QTableView();
  flight_recorder_->setObjectName("flightRecorder");
  flight_model_ = new FlightRecorderModel(this);
  flight_recorder_->setModel(flight_model_);
  // Each column as wide as what it holds (the table scrolls when they do not fit), no empty
  // column stretched over the rest; long cells show whole on hover.
  flight_recorder_->horizontalHeader()->setSectionResizeMode(QHeaderView::ResizeToContents);
  flight_recorder_->horizontalHeader()->setStretchLastSection(false);
  flight_recorder_->verticalHeader()->hide();
  flight_recorder_->setEditTriggers(QAbstractItemView::NoEditTriggers);
  recorder_layout->addWidget(flight_recorder_, 1);
}

void FlightRecorderPanel::apply(const RunSnapshot& s) {
  flight_model_->setRows({});
  if (s.dumps.empty()) return;
  // The furthest collective any rank reached; ranks that did not reach it are what blocks.
  struct RankState {
    QString completed, in_flight;
    int64_t furthest = 0;
  };
  std::map<int, RankState> states;
  int64_t furthest = 0;
  QString furthest_name;
  for (const auto& dump : s.dumps) {
    RankState& state = states[dump.rank];
    auto entries = nlohmann::json::parse(dump.dump_json, nullptr, false);
    if (!entries.is_array()) continue;
    QStringList in_flight;
    for (const auto& e : entries) {
      const int64_t seq = e.value("seq", int64_t{0});
      const QString name =
          QString("%1 #%2").arg(untrustedLine(e.value("op", std::string("?")))).arg(seq);
      const std::string st = e.value("state", std::string());
      if (st == "completed")
        state.completed = name;
      else
        in_flight << QString("%1 (%2)").arg(name, untrustedLine(st));
      if (e.contains("peer")) continue;  // point-to-point: not a collective every rank reaches
      state.furthest = std::max(state.furthest, seq);
      if (seq > furthest) {
        furthest = seq;
        furthest_name = name;
      }
    }
    state.in_flight = in_flight.join(", ");
  }
  QStringList missing;
  for (int r = 0; r < s.run().world_size; ++r) {
    auto it = states.find(r);
    if (it == states.end() || it->second.furthest < furthest) missing << QString::number(r);
  }
  flight_summary_->setText(
      QString("<b>Flight recorder</b>: %1 dump%2; furthest collective %3; ranks that did not reach "
              "it: %4")
          .arg(s.dumps.size())
          .arg(s.dumps.size() == 1 ? "" : "s")
          .arg(furthest_name.isEmpty() ? "none" : furthest_name.toHtmlEscaped())
          .arg(missing.isEmpty() ? "none" : missing.join(", ")));
  std::vector<FlightRecorderRow> rows;
  for (const auto& [rank, state] : states)
    rows.push_back({rank, state.completed, state.in_flight,
                    state.furthest < furthest ? furthest_name : QString()});
  flight_model_->setRows(std::move(rows));
}

QString FlightRecorderPanel::summaryText() const {
  return flight_summary_->text();
}

}  // namespace ringmaster::ui
