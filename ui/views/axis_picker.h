// The scatter's axis pickers (the compare view's X / Y / colour, the sweep view's X / Y): a
// labelled combo box sized for a field's name, added to a row of them. What a pick does is the
// caller's.
#pragma once

class QComboBox;
class QHBoxLayout;
class QString;

namespace ringmaster::ui {

// A combo box named `object_name` after the label `label`, both added to `row`; the combo box.
QComboBox* addAxisPicker(QHBoxLayout* row, const QString& object_name, const QString& label);

}  // namespace ringmaster::ui
