// Number formatting shared by the views (bytes through core/number_format, the CLI's formatter).
// Every result is bounded in length whatever the value (a database may hold 1e308 or an infinity),
// and no byte count or duration prints negative.
#include "models/format.h"

#include <cmath>

#include "core/number_format.h"
#include "query/figures.h"

namespace ringmaster::ui {

QString formatDuration(double seconds) {
  if (!(seconds > 0) || !std::isfinite(seconds)) return "–";
  if (seconds >= 1e9) return QString("%1 h").arg(seconds / 3600, 0, 'g', 3);  // beyond 31 years
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return QString("%1 s").arg(s);
  if (s < 3600) return QString("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
  return QString("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QChar('0'));
}

QString formatBytes(double bytes) {
  return QString::fromStdString(ringmaster::formatBytes(bytes, kWindowBytes));
}

QString formatFigure(double value) {
  if (!std::isfinite(value)) return "–";
  if (value == 0) value = 0;  // not "-0.000"
  const double magnitude = std::abs(value);
  if (magnitude >= 1e6 || (magnitude > 0 && magnitude < 1e-3))
    return QString::number(value, 'g', 3);
  const int decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3;
  return QString::number(value, 'f', decimals);
}

QString formatMs(double ms) {
  if (!(ms >= 0) || !std::isfinite(ms)) return "–";  // no duration is negative
  if (ms >= 1000) return QString("%1 s").arg(formatFigure(ms / 1000));
  return QString("%1 ms").arg(formatFigure(ms));
}

QString formatFigureValue(std::string_view figure_id, double value) {
  switch (storage::figure(figure_id).kind) {
    case storage::FigureKind::kFraction:
      return std::isfinite(value) ? QString("%1%").arg(value * 100, 0, 'f', 1) : "–";
    case storage::FigureKind::kBytes:
      return formatBytes(value);
    case storage::FigureKind::kMilliseconds:
      return formatMs(value);
    case storage::FigureKind::kSeconds:
      return formatDuration(value);
    default:
      return formatFigure(value);
  }
}

QString figureName(std::string_view id) {
  const std::string_view name = storage::figure(id).name;
  return QString::fromUtf8(name.data(), static_cast<qsizetype>(name.size()));
}

QString figureHeading(std::string_view id) {
  QString name = figureName(id);
  if (!name.isEmpty()) name[0] = name[0].toUpper();
  return name;
}

}  // namespace ringmaster::ui
