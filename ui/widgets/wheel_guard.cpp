// guardWheel: one event filter per application, installed on each guarded box.
#include "widgets/wheel_guard.h"

#include <QAbstractScrollArea>
#include <QAbstractSpinBox>
#include <QComboBox>
#include <QCoreApplication>
#include <QWheelEvent>
#include <QWidget>

namespace ringmaster::ui {

namespace {

class WheelGuard : public QObject {
 public:
  using QObject::QObject;

 protected:
  bool eventFilter(QObject* watched, QEvent* event) override {
    auto* box = qobject_cast<QWidget*>(watched);
    if (event->type() != QEvent::Wheel || !box || box->hasFocus()) return false;
    // Delivered to the scroll area here rather than left to propagate: Qt propagates only
    // spontaneous wheel events to the parent.
    for (QWidget* above = box->parentWidget(); above; above = above->parentWidget()) {
      if (auto* area = qobject_cast<QAbstractScrollArea*>(above)) {
        auto* wheel = static_cast<QWheelEvent*>(event);
        const QPointF at = area->viewport()->mapFromGlobal(wheel->globalPosition());
        QWheelEvent forwarded(at, wheel->globalPosition(), wheel->pixelDelta(), wheel->angleDelta(),
                              wheel->buttons(), wheel->modifiers(), wheel->phase(),
                              wheel->inverted(), wheel->source());
        QCoreApplication::sendEvent(area->viewport(), &forwarded);
        break;
      }
    }
    event->accept();
    return true;  // never the box's
  }
};

}  // namespace

void guardWheel(QWidget* root) {
  static WheelGuard* guard = new WheelGuard(QCoreApplication::instance());
  const auto guardBox = [](QWidget* box) {
    box->setFocusPolicy(Qt::StrongFocus);
    box->removeEventFilter(guard);
    box->installEventFilter(guard);
  };
  for (QComboBox* box : root->findChildren<QComboBox*>()) guardBox(box);
  for (QAbstractSpinBox* box : root->findChildren<QAbstractSpinBox*>()) guardBox(box);
}

}  // namespace ringmaster::ui
