// OneLineLabel: a plain-text QLabel that paints its text elided on one line and keeps its height
// when hidden.
#include "widgets/one_line_label.h"

#include <QPainter>
#include <QStyle>

namespace ringmaster::ui {

namespace {

QString oneLine(const QString& text) {
  QString line = text.trimmed();
  line.replace('\n', "; ");
  return line;
}

}  // namespace

OneLineLabel::OneLineLabel(QWidget* parent) : QLabel(parent) {
  setTextFormat(Qt::PlainText);  // quotes names and values from the document
  QSizePolicy policy(QSizePolicy::Ignored, QSizePolicy::Fixed);
  policy.setRetainSizeWhenHidden(true);
  setSizePolicy(policy);
}

void OneLineLabel::setMessage(const QString& text) {
  setText(text);
  setToolTip(text);
}

QSize OneLineLabel::sizeHint() const {
  return {fontMetrics().horizontalAdvance(oneLine(text())), fontMetrics().height()};
}

QSize OneLineLabel::minimumSizeHint() const {
  return {0, fontMetrics().height()};
}

void OneLineLabel::paintEvent(QPaintEvent*) {
  QPainter painter(this);
  const QRect area = contentsRect();
  const QString shown = fontMetrics().elidedText(oneLine(text()), Qt::ElideRight, area.width());
  style()->drawItemText(&painter, area, Qt::AlignLeft | Qt::AlignVCenter, palette(), isEnabled(),
                        shown, foregroundRole());
}

}  // namespace ringmaster::ui
