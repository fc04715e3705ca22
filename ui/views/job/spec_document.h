// What the job editor's parts share about the spec document they edit (a JSON object, the single
// source of truth): its fields read and written by dotted path ("train.steps"), a value as the form
// shows it as text and back, and the strategy a program job is recorded with. No widgets here.
#pragma once

#include <QString>
#include <array>
#include <nlohmann/json.hpp>
#include <optional>
#include <string>

#include "spec/spec_fields.h"

namespace ringmaster::ui {

// The job kind choice's items, in JobKind order.
inline constexpr std::array<JobKind, 2> kJobKinds = {JobKind::kEngine, JobKind::kProgram};

// The value at a dotted path; nullptr when it is not there.
const nlohmann::json* getPath(const nlohmann::json& doc, const std::string& path);
// Writes the value at a dotted path (making the objects on the way), or, for nullopt, erases it
// and the objects it leaves empty.
void setPath(nlohmann::json& doc, const std::string& path, std::optional<nlohmann::json> value);

// A typed value from text: JSON when it parses as a number, true / false or a list, else a string
// (so the parser, not the form, says what is wrong with "abc" in a number field).
nlohmann::json valueFromText(const QString& text);
// A value as a line edit shows it (a list as "a, b").
QString textOf(const nlohmann::json& value);
bool isList(FieldType type);

// The lines of a text list (one item per line) or a text map (one NAME=VALUE per line) as the
// form shows them; nullopt when the lines could not give the value back.
std::optional<QString> editorLinesOf(FieldType type, const nlohmann::json& value);
// The object NAME=VALUE lines give (blank lines skipped; a line without '=' is its name with a
// null value, which the parser then calls not a string, next to the field).
nlohmann::json mapOfLines(const QString& text);

// The document with its objects' keys in the order of `order` (the text it was read from, or the
// text last shown): keys `order` has keep their place, others follow in the spec description's
// order (spec_fields.h), keys it does not describe last. The JSON text shows a spec this way, as
// written, where nlohmann::json itself sorts keys.
nlohmann::ordered_json inKeyOrder(const nlohmann::json& document,
                                  const nlohmann::ordered_json& order);

// The strategy kind a program job is recorded with when it names none: the parser's rule (ddp on
// several ranks, single on one), from the document's hosts.
std::string programStrategyKind(const nlohmann::json& document);
// The strategy kind a program job made from `document` is recorded with: its strategy.kind, or
// the layout its mesh names where that is one of a program job's kinds (strategyLabel), else
// programStrategyKind.
std::string programStrategyKindOf(const nlohmann::json& document);
// Whether a strategy block has the mesh form (strategy.mesh, .dp, .tp or .pp) rather than the
// legacy flat form's kind.
bool isMeshForm(const nlohmann::json& strategy);

}  // namespace ringmaster::ui
