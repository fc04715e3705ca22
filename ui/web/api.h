// The JSON API of the web dashboard (docs/web.md), version 1: every GET under /api/v1 answered from
// one read-only database connection with storage/'s queries, the same ones the desktop views use.
// No HTTP here: the server passes the path below /api/v1 and the query parameters, and turns an
// ApiError into its status and {"error": {"status", "message"}} body.
#pragma once

#include <cstdint>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "db/database.h"

namespace ringmaster::web {

using QueryParams = std::multimap<std::string, std::string>;

// A request the API refuses: 400 for a bad parameter (the message names it), 404 for an unknown
// run or path.
class ApiError : public std::runtime_error {
 public:
  ApiError(int status, const std::string& message) : std::runtime_error(message), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

struct ApiLimits {
  int max_buckets = 4096;           // series and heat map buckets
  int max_log_lines = 10000;        // logs?limit
  int max_compare_runs = 8;         // compare?runs
  size_t max_text_parameter = 256;  // name=, contains=
};

// Answers GET /api/v1<path> ("/runs", "/runs/3/series", ...). Throws ApiError.
nlohmann::json handleApi(const storage::Database& db, std::string_view path,
                         const QueryParams& params, const ApiLimits& limits = {});

// Answers a write (issue 33): POST /api/v1/runs/ID/tags {"add": [...], "remove": [...]},
// POST .../note {"note": TEXT}, POST .../name {"name": TEXT} and DELETE /api/v1/runs/ID, which
// answers the rows deleted per table. Throws ApiError: 400 for a bad body or a value out of its
// bounds, 404 for no such run, 405 for the wrong method, 409 for a run that may still be live.
// The caller has checked who asks (web_server.cpp).
nlohmann::json handleApiWrite(storage::Database& db, std::string_view method, std::string_view path,
                              const std::string& body);

// The runs-list entry of one run (also what the event stream's `runs` event carries).
nlohmann::json runListEntry(const storage::Database& db, int64_t run_id);

// The last step any rank of the run reported (0 when none): one index seek per rank.
int64_t lastStep(const storage::Database& db, int64_t run_id, int world_size);

}  // namespace ringmaster::web
