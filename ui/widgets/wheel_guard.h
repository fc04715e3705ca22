// The mouse wheel over a form: it scrolls the form and never changes a menu or a number box it
// passes over. guardWheel() gives every combo box and spin box under a widget the strong focus
// policy (a click or Tab focuses it, the wheel does not) and sends the wheel events that reach
// one without focus to the nearest scroll area above it. A focused one takes the wheel as usual.
#pragma once

class QWidget;

namespace ringmaster::ui {

// Guards every QComboBox and QAbstractSpinBox under `root` now (call it again for ones added
// later; guarding twice is harmless).
void guardWheel(QWidget* root);

}  // namespace ringmaster::ui
