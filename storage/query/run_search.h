// The one search line every front end reads (issue 33): `ringmaster runs --search`, the desktop's
// history search box and the web runs page's `?q=`. Parsed into a RunFilter (query/runs.h), with
// each term that is not one said as a problem, never thrown: a person types it.
//
//   words            each in the run's name, one of its tags or its note (any case)
//   "two words"      a phrase, as one word
//   tag:T            has the tag T           note:TEXT   the note holds TEXT
//   status:S         pending, running, ...   strategy:S  ddp, fsdp, ...
//   name:TEXT        the name holds TEXT     optimizer.lr=3e-4   a spec field's value
//   since:DATE       created at or after     until:DATE  created on or before
//
// DATE is 2026-11-28, 2026-11-28T14:05 (local time) or an age: 30m, 12h, 7d, 2w. until: with a
// day alone means to the end of that day.
#pragma once

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "query/runs.h"

namespace ringmaster::storage {

struct RunSearch {
  RunFilter filter;
  std::vector<std::string> problems;  // one per term that could not be read, naming it
};

// `now`: seconds since the epoch, for ages (7d).
RunSearch parseRunSearch(std::string_view text, double now);

// A DATE as above, in seconds since the epoch; `end_of_day` moves a day alone to its end (for
// until). nullopt when it is none.
std::optional<double> parseSearchDate(std::string_view text, bool end_of_day, double now);

// Adds `key:value` (tag, status, strategy, name, note, since, until) or a spec field `path=value`
// to `filter`; returns the problem, or an empty string when it applied.
std::string applySearchTerm(RunFilter& filter, std::string_view term, double now);

// The statuses a run can have (status: takes only these).
const std::vector<std::string>& runStatuses();

}  // namespace ringmaster::storage
