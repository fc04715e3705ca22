// Number formatting shared by the views.
#include "models/format.h"

#include <cmath>

namespace ringmaster::ui {

QString formatDuration(double seconds) {
  if (seconds <= 0) return "–";
  const auto s = static_cast<int64_t>(std::llround(seconds));
  if (s < 60) return QString("%1 s").arg(s);
  if (s < 3600) return QString("%1 min %2 s").arg(s / 60).arg(s % 60, 2, 10, QChar('0'));
  return QString("%1 h %2 min").arg(s / 3600).arg((s % 3600) / 60, 2, 10, QChar('0'));
}

QString formatBytes(double bytes) {
  static const char* units[] = {"B", "KiB", "MiB", "GiB", "TiB"};
  int unit = 0;
  while (std::abs(bytes) >= 1024 && unit < 4) {
    bytes /= 1024;
    ++unit;
  }
  return unit == 0 ? QString("%1 B").arg(static_cast<int64_t>(bytes))
                   : QString("%1 %2")
                         .arg(bytes, 0, 'f',
                              bytes < 10    ? 2
                              : bytes < 100 ? 1
                                            : 0)
                         .arg(units[unit]);
}

QString formatFigure(double value) {
  if (!std::isfinite(value)) return "–";
  const double magnitude = std::abs(value);
  if (magnitude >= 1e6 || (magnitude > 0 && magnitude < 1e-3))
    return QString::number(value, 'g', 3);
  const int decimals = magnitude >= 100 ? 0 : magnitude >= 10 ? 1 : magnitude >= 1 ? 2 : 3;
  return QString::number(value, 'f', decimals);
}

QString formatMs(double ms) {
  if (ms >= 1000) return QString("%1 s").arg(ms / 1000, 0, 'f', 2);
  return QString("%1 ms").arg(formatFigure(ms));
}

}  // namespace ringmaster::ui
