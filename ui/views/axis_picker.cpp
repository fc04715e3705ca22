// The scatter's axis pickers: a label and a combo box that stretches, in a row of pickers.
#include "views/axis_picker.h"

#include <QComboBox>
#include <QHBoxLayout>
#include <QLabel>

namespace ringmaster::ui {

QComboBox* addAxisPicker(QHBoxLayout* row, const QString& object_name, const QString& label) {
  auto* combo = new QComboBox();
  combo->setObjectName(object_name);
  combo->setSizeAdjustPolicy(QComboBox::AdjustToMinimumContentsLengthWithIcon);
  combo->setMinimumContentsLength(10);
  row->addWidget(new QLabel(label));
  row->addWidget(combo, 1);
  return combo;
}

}  // namespace ringmaster::ui
