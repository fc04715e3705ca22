// The window's side of displaySafe: QStrings for plain and rich-text places.
#include "models/untrusted_text.h"

#include "core/display_text.h"

namespace ringmaster::ui {

QString untrustedLine(std::string_view text) {
  return QString::fromStdString(displaySafeLine(text));
}

QString untrustedMessageLine(std::string_view text) {
  return QString::fromStdString(displaySafeMessageLine(text));
}

QString untrustedBlock(std::string_view text) {
  return QString::fromStdString(displaySafe(text));
}

QString untrustedHtml(std::string_view text) {
  return untrustedBlock(text).toHtmlEscaped();
}

QString richTextShowingPlain(const QString& text) {
  return "<p style='white-space:pre-wrap'>" + text.toHtmlEscaped() + "</p>";
}

}  // namespace ringmaster::ui
