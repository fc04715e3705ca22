// What the run view's tabs share: a rank's colour (the web page's palette) and whether a run in a
// status may still record.
#pragma once

#include <QColor>
#include <iterator>
#include <string>

namespace ringmaster::ui {

inline QColor rankColor(int rank) {
  static const QColor palette[] = {{0x1f, 0x77, 0xb4}, {0xff, 0x7f, 0x0e}, {0x2c, 0xa0, 0x2c},
                                   {0xd6, 0x27, 0x28}, {0x94, 0x67, 0xbd}, {0x8c, 0x56, 0x4b},
                                   {0xe3, 0x77, 0xc2}, {0x7f, 0x7f, 0x7f}, {0xbc, 0xbd, 0x22},
                                   {0x17, 0xbe, 0xcf}};
  return palette[static_cast<size_t>(rank) % std::size(palette)];
}

inline bool stillGoing(const std::string& status) {
  return status == "pending" || status == "running";
}

}  // namespace ringmaster::ui
