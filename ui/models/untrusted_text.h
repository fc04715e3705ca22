// Untrusted text (a worker's error or log line, a host, device, op or run name, a spec value) as
// the window shows it: through displaySafe (core/display_text.h), so controls, bidi overrides and
// invalid UTF-8 appear as visible escapes and every text is bounded in length; and, where Qt may
// take a string for rich text (a tooltip, a label in rich text), escaped so that "<b>" shows as
// "<b>" and is never rendered.
#pragma once

#include <QString>
#include <string_view>

namespace ringmaster::ui {

// One line (a table cell, a name, a title): '\n' and '\t' are escaped too.
QString untrustedLine(std::string_view text);
// A message on one line (a log line in the log view): escaped as a line, bounded as a block.
QString untrustedMessageLine(std::string_view text);
// A block that may hold several lines (an error's body, a log message in a dialog).
QString untrustedBlock(std::string_view text);
// untrustedBlock's text as HTML, to put inside a rich-text label: "<" becomes "&lt;".
QString untrustedHtml(std::string_view text);
// Rich text that shows `text` exactly as it is, lines kept: for a tooltip or a message box, which
// Qt renders as rich text whenever the text merely looks like it.
QString richTextShowingPlain(const QString& text);

}  // namespace ringmaster::ui
