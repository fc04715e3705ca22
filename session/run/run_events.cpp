// The run events' JSON lines, written and read with nlohmann::json.
#include "run/run_events.h"

#include <cerrno>
#include <cstring>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ringmaster::session {

std::string encodeRunEvent(const RunEvent& event) {
  nlohmann::json json{{"event", event.event}};
  if (event.run != 0) json["run"] = event.run;
  if (event.event == "created") {
    json["world_size"] = event.world_size;
  } else if (event.event == "progress") {
    json["step"] = event.step;
    json["total_steps"] = event.total_steps;
    json["ranks_started"] = event.ranks_started;
    if (event.loss) json["loss"] = *event.loss;
  } else if (event.event == "finished") {
    json["status"] = event.status;
  } else if (event.event == "error") {
    json["message"] = event.message;
  }
  if (event.exit_code) json["exit_code"] = *event.exit_code;
  // A non-finite loss is written as null by nlohmann; replacement keeps odd bytes from throwing.
  return json.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
}

std::optional<RunEvent> decodeRunEvent(std::string_view line) {
  const nlohmann::json json = nlohmann::json::parse(line, nullptr, /*allow_exceptions=*/false);
  if (!json.is_object() || !json.contains("event") || !json["event"].is_string())
    return std::nullopt;
  RunEvent event;
  event.event = json["event"].get<std::string>();
  const auto integer = [&](const char* key, auto& into) {
    if (json.contains(key) && json[key].is_number_integer())
      into = json[key].get<std::remove_reference_t<decltype(into)>>();
  };
  integer("run", event.run);
  integer("world_size", event.world_size);
  integer("step", event.step);
  integer("total_steps", event.total_steps);
  integer("ranks_started", event.ranks_started);
  if (json.contains("loss") && json["loss"].is_number()) event.loss = json["loss"].get<double>();
  if (json.contains("status") && json["status"].is_string())
    event.status = json["status"].get<std::string>();
  if (json.contains("exit_code") && json["exit_code"].is_number_integer())
    event.exit_code = json["exit_code"].get<int>();
  if (json.contains("message") && json["message"].is_string())
    event.message = json["message"].get<std::string>();
  return event;
}

RunEventWriter::RunEventWriter(const std::string& path) : path_(path) {
  file_ = std::fopen(path.c_str(), "ae");
  if (file_ == nullptr)
    RM_THROW(kIo, fmt::format("cannot open the events file {}: {}", path, std::strerror(errno)));
}

RunEventWriter::~RunEventWriter() {
  if (file_) std::fclose(file_);
}

void RunEventWriter::write(const RunEvent& event) {
  if (!failure_.empty()) return;
  const std::string line = encodeRunEvent(event) + "\n";
  if (std::fwrite(line.data(), 1, line.size(), file_) != line.size() || std::fflush(file_) != 0)
    failure_ = fmt::format("writing the events file {}: {}", path_, std::strerror(errno));
}

}  // namespace ringmaster::session
