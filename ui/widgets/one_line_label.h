// A label that is always one line high, shown or hidden: its text (line breaks read as "; ") is
// elided to its width, the whole text on hover. For messages that appear under a field without
// moving the fields below it.
#pragma once

#include <QLabel>

namespace ringmaster::ui {

class OneLineLabel : public QLabel {
  Q_OBJECT

 public:
  explicit OneLineLabel(QWidget* parent = nullptr);

  // The text as given (text() returns it whole); the tooltip follows it.
  void setMessage(const QString& text);
  QSize sizeHint() const override;
  QSize minimumSizeHint() const override;

 protected:
  void paintEvent(QPaintEvent* event) override;
};

}  // namespace ringmaster::ui
