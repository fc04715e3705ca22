// The API's writes (issue 33): a run's tags, note and name, and its deletion, each one call of
// recorder/run_edits.h. Who may write is the server's business (web_server.cpp: the token, and
// same-origin requests only); here only what is written.
#include <charconv>

#include <fmt/format.h>

#include "api.h"
#include "core/error.h"
#include "db/statement.h"
#include "recorder/run_edits.h"

namespace ringmaster::web {

namespace {

using nlohmann::json;

json bodyObject(const std::string& body) {
  json parsed = json::parse(body, nullptr, /*allow_exceptions=*/false);
  if (!parsed.is_object()) throw ApiError(400, "the request body: expected a JSON object");
  return parsed;
}

std::vector<std::string> stringList(const json& body, const char* name) {
  if (!body.contains(name)) return {};
  const json& list = body.at(name);
  if (!list.is_array()) throw ApiError(400, fmt::format("{}: expected an array of tags", name));
  std::vector<std::string> out;
  for (const json& item : list) {
    if (!item.is_string()) throw ApiError(400, fmt::format("{}: expected an array of tags", name));
    out.push_back(item.get<std::string>());
  }
  return out;
}

std::string stringField(const json& body, const char* name) {
  if (!body.contains(name) || !body.at(name).is_string())
    throw ApiError(400, fmt::format("{}: expected a string", name));
  return body.at(name).get<std::string>();
}

int64_t existingRun(const storage::Database& db, std::string_view segment) {
  int64_t id = 0;
  const auto [end, ec] = std::from_chars(segment.data(), segment.data() + segment.size(), id);
  if (ec != std::errc() || end != segment.data() + segment.size() || id < 1)
    throw ApiError(400, "run id: expected a positive integer");
  storage::Statement query(db, "SELECT 1 FROM runs WHERE id = ?");
  query.bind(1, id);
  if (!query.run()) throw ApiError(404, fmt::format("no run {}", id));
  query.reset();
  return id;
}

// A refusal of the edit itself (a bound, a live run) is the client's to fix.
template <typename Edit>
json refusedAs(int status, Edit edit) {
  try {
    return edit();
  } catch (const Error& e) {
    if (e.kind() != ErrorKind::kInvalidArgument) throw;
    throw ApiError(status, e.what());
  }
}

}  // namespace

json handleApiWrite(storage::Database& db, std::string_view method, std::string_view path,
                    const std::string& body) {
  // /runs/ID (DELETE) or /runs/ID/tags|note|name (POST)
  std::vector<std::string_view> parts;
  for (size_t start = 0; start < path.size();) {
    const size_t slash = path.find('/', start);
    const size_t end = slash == std::string_view::npos ? path.size() : slash;
    if (end > start) parts.push_back(path.substr(start, end - start));
    start = end + 1;
  }
  if (parts.size() < 2 || parts.size() > 3 || parts[0] != "runs")
    throw ApiError(404, "no such API path for a write");
  const int64_t run_id = existingRun(db, parts[1]);
  if (parts.size() == 2) {
    if (method != "DELETE") throw ApiError(405, "a run is deleted with DELETE");
    return refusedAs(409, [&] {
      const storage::DeletedRows deleted = storage::deleteRun(db, run_id);
      json rows = json::object();
      for (const auto& [table, count] : deleted.per_table)
        if (count > 0) rows[table] = count;
      return json{{"run", run_id}, {"rows", rows}, {"total", deleted.total()}};
    });
  }
  if (method != "POST") throw ApiError(405, "tags, note and name are set with POST");
  const json request = bodyObject(body);
  const std::string_view what = parts[2];
  return refusedAs(400, [&]() -> json {
    if (what == "tags")
      return {{"run", run_id},
              {"tags", storage::setRunTags(db, run_id, stringList(request, "add"),
                                           stringList(request, "remove"))}};
    if (what == "note") {
      storage::setRunNote(db, run_id, stringField(request, "note"));
      return {{"run", run_id}, {"note", stringField(request, "note")}};
    }
    if (what == "name") {
      storage::renameRun(db, run_id, stringField(request, "name"));
      return {{"run", run_id}, {"name", stringField(request, "name")}};
    }
    throw ApiError(404, "no such API path for a write");
  });
}

}  // namespace ringmaster::web
