// `ringmaster spec fields`: every job spec field as the job editor builds its form from it
// (engine/spec/spec_fields.h): path, type and bounds, default, choices, when it applies, help.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "cli/command.h"

namespace ringmaster::cli {

// The fields by section, one entry per field with its help indented under it.
std::string specFieldsText();

// The fields as a JSON array of {path, section, label, type, required, default, choices,
// minimum, maximum, exclusive_minimum, exclusive_maximum, when, defaults_when, help}; keys whose
// value would be empty are left out.
nlohmann::json specFieldsJson();

// Prints one of the two; exit code 0.
int specFieldsCommand(bool json);

// `spec fields`.
void addSpecCommand(CLI::App& app, Commands& commands);

}  // namespace ringmaster::cli
