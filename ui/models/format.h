// How the views write numbers: durations, byte counts, rates and figures with sensible precision.
#pragma once

#include <QString>
#include <cstdint>
#include <string_view>

namespace ringmaster::ui {

QString formatDuration(double seconds);  // "42 s", "3 min 05 s", "2 h 10 min"
QString formatBytes(double bytes);       // "812 KiB", "1.50 GiB": core/number_format, kWindowBytes
QString formatFigure(double value);      // 3 significant digits, no exponent below 1e6
QString formatMs(double ms);             // "0.412 ms", "12.3 ms", "1.20 s"
// A value of a figure (storage/query/figures.h) as its kind reads: "47.0%", "1.50 GiB", "12.3 ms".
QString formatFigureValue(std::string_view figure_id, double value);

// A figure's one name (storage/query/figures.h: "exposed comm share"), and as a heading, its first
// letter capitalised ("Exposed comm share").
QString figureName(std::string_view id);
QString figureHeading(std::string_view id);

}  // namespace ringmaster::ui
