// Which texts of each event are names and which are messages, and cutting them.
#include "recorder/text_bounds.h"

#include <fmt/format.h>

#include <string_view>
#include <type_traits>
#include <variant>
#include <vector>

namespace ringmaster::storage {

namespace {

// Calls f(field, text, max_bytes) for `text`, or for the text an optional holds.
template <typename Text, typename F>
void visitText(std::string_view field, Text& text, std::size_t max_bytes, F& f) {
  if constexpr (requires { text.has_value(); }) {
    if (text) f(field, *text, max_bytes);
  } else {
    f(field, text, max_bytes);
  }
}

// Calls f(field, text, max_bytes) for each free text of an event's body, const or not. Step,
// eval, sched and done events hold none; the flight recorder's JSON is not free text.
template <typename Body, typename F>
void forEachText(Body& body, F&& f) {
  using Kind = std::remove_const_t<Body>;
  const auto name = [&](std::string_view field, auto& text) {
    visitText(field, text, kMaxStoredNameBytes, f);
  };
  const auto message = [&](std::string_view field, auto& text) {
    visitText(field, text, kMaxStoredMessageBytes, f);
  };
  if constexpr (std::is_same_v<Kind, HelloEvent>) {
    name("hello.host", body.host);
    name("hello.device", body.device);
    name("hello.device_name", body.device_name);
    name("hello.version", body.version);
    name("hello.run_id", body.run_id);
    name("hello.strategy", body.strategy);
  } else if constexpr (std::is_same_v<Kind, CommEvent>) {
    name("comm.op", body.op);
    name("comm.group", body.group);
    name("comm.dtype", body.dtype);
  } else if constexpr (std::is_same_v<Kind, LogEvent>) {
    message("log.message", body.message);
  } else if constexpr (std::is_same_v<Kind, ErrorEvent>) {
    message("error.message", body.message);
    name("error.kind", body.kind);
    name("error.where", body.where);
    name("error.host", body.host);
    name("error.signal", body.signal);
  } else if constexpr (std::is_same_v<Kind, ProgressEvent>) {
    name("progress.group", body.group);
    name("progress.completed_op", body.completed_op);
    name("progress.op", body.op);
    message("progress.not_arrived", body.not_arrived);
    message("progress.silent", body.silent);
  } else if constexpr (std::is_same_v<Kind, FlightEvent>) {
    message("flight.reason", body.reason);
  }
}

}  // namespace

std::string cutText(const std::string& text, std::size_t max_bytes) {
  std::size_t end = max_bytes - 3;
  // Back to a character's first byte (never inside a UTF-8 sequence).
  while (end > 0 && (static_cast<unsigned char>(text[end]) & 0xC0) == 0x80) --end;
  return text.substr(0, end) + "...";
}

std::optional<TelemetryEvent> withTextsBounded(const TelemetryEvent& event, std::string& cut) {
  bool over = false;
  std::visit(
      [&](const auto& body) {
        forEachText(body, [&](std::string_view, const std::string& text, std::size_t max_bytes) {
          over |= text.size() > max_bytes;
        });
      },
      event.body);
  if (!over) return std::nullopt;
  TelemetryEvent bounded = event;
  std::vector<std::string> cuts;
  std::visit(
      [&](auto& body) {
        forEachText(body, [&](std::string_view field, std::string& text, std::size_t max_bytes) {
          if (text.size() <= max_bytes) return;
          cuts.push_back(fmt::format("{} ({} bytes)", field, text.size()));
          text = cutText(text, max_bytes);
        });
      },
      bounded.body);
  cut = fmt::format("{}", fmt::join(cuts, ", "));
  return bounded;
}

}  // namespace ringmaster::storage
