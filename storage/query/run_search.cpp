// The search line's terms (query/run_search.h) read into a RunFilter; nothing here touches the
// database.
#include "query/run_search.h"

#include <algorithm>
#include <cctype>
#include <cstdlib>
#include <ctime>
#include <regex>
#include <utility>

#include <fmt/format.h>
#include <fmt/ranges.h>

namespace ringmaster::storage {

namespace {

constexpr size_t kLongestTerm = 256;

// The line cut into terms at white space; a double-quoted stretch stays one term, quotes removed.
std::vector<std::string> splitTerms(std::string_view text) {
  std::vector<std::string> terms;
  std::string term;
  bool quoted = false, any = false;
  for (const char c : text) {
    if (c == '"') {
      quoted = !quoted;
      any = true;
    } else if (!quoted && std::isspace(static_cast<unsigned char>(c))) {
      if (any) terms.push_back(std::exchange(term, {}));
      any = false;
    } else {
      term += c;
      any = true;
    }
  }
  if (any) terms.push_back(term);
  terms.erase(std::remove(terms.begin(), terms.end(), std::string()), terms.end());
  return terms;
}

// Local midnight of a day, or a local time of day.
std::optional<double> localTime(int year, int month, int day, int hour, int minute, int second) {
  if (year < 1970 || year > 9999 || month < 1 || month > 12 || day < 1 || day > 31 || hour > 23 ||
      minute > 59 || second > 59)
    return std::nullopt;
  std::tm parts{};
  parts.tm_year = year - 1900;
  parts.tm_mon = month - 1;
  parts.tm_mday = day;
  parts.tm_hour = hour;
  parts.tm_min = minute;
  parts.tm_sec = second;
  parts.tm_isdst = -1;
  const std::time_t time = std::mktime(&parts);
  if (time == static_cast<std::time_t>(-1) || parts.tm_mday != day) return std::nullopt;
  return static_cast<double>(time);
}

}  // namespace

const std::vector<std::string>& runStatuses() {
  static const std::vector<std::string> kStatuses = {"pending", "running",   "completed",
                                                     "failed",  "cancelled", "interrupted"};
  return kStatuses;
}

std::optional<double> parseSearchDate(std::string_view text, bool end_of_day, double now) {
  const std::string date(text.substr(0, kLongestTerm));
  std::smatch match;
  static const std::regex kAge(R"(([0-9]{1,6})([mhdw]))");
  if (std::regex_match(date, match, kAge)) {
    const double count = std::stod(match[1].str());
    const char unit = match[2].str()[0];
    const double seconds = unit == 'm' ? 60 : unit == 'h' ? 3600 : unit == 'd' ? 86400 : 604800;
    return now - count * seconds;
  }
  static const std::regex kDate(
      R"(([0-9]{4})-([0-9]{2})-([0-9]{2})(?:[T ]([0-9]{2}):([0-9]{2})(?::([0-9]{2}))?)?)");
  if (!std::regex_match(date, match, kDate)) return std::nullopt;
  const auto field = [&match](int i) { return match[i].matched ? std::stoi(match[i].str()) : 0; };
  const bool day_alone = !match[4].matched;
  std::optional<double> time =
      localTime(field(1), field(2), field(3), field(4), field(5), field(6));
  if (time && day_alone && end_of_day)  // the next local midnight (a day is not always 24 h)
    time = localTime(field(1), field(2), field(3), 23, 59, 59).value_or(*time) + 1;
  return time;
}

std::string applySearchTerm(RunFilter& filter, std::string_view term, double now) {
  const std::string text(term);
  if (text.size() > kLongestTerm)
    return fmt::format("'{}...': a term is at most {} characters", text.substr(0, 32),
                       kLongestTerm);
  const size_t colon = text.find(':');
  const size_t equals = text.find('=');
  if (equals != std::string::npos && (colon == std::string::npos || equals < colon)) {
    const std::string path = text.substr(0, equals);
    static const std::regex kPath(R"([A-Za-z_][A-Za-z0-9_\[\].-]*)");
    if (!std::regex_match(path, kPath))
      return fmt::format("'{}': a spec field is written path=value, as optimizer.lr=3e-4", text);
    filter.spec_fields.push_back({path, text.substr(equals + 1)});
    return {};
  }
  const std::string key = colon == std::string::npos ? "" : text.substr(0, colon);
  const std::string value = colon == std::string::npos ? "" : text.substr(colon + 1);
  if (key == "tag") {
    filter.tags.push_back(value);
  } else if (key == "note") {
    filter.note_contains = value;
  } else if (key == "name") {
    filter.name_contains = value;
  } else if (key == "strategy") {
    filter.strategy = value;
  } else if (key == "status") {
    const auto& statuses = runStatuses();
    if (std::find(statuses.begin(), statuses.end(), value) == statuses.end())
      return fmt::format("'{}': a status is one of {}", text, fmt::join(statuses, ", "));
    filter.status = value;
  } else if (key == "since" || key == "until") {
    const std::optional<double> time = parseSearchDate(value, key == "until", now);
    if (!time)
      return fmt::format(
          "'{}': a date is 2026-11-28, 2026-11-28T14:05 or an age (30m, 12h, 7d, "
          "2w)",
          text);
    (key == "since" ? filter.created_after : filter.created_before) = *time;
  } else {
    filter.words.push_back(text);  // a word with a colon that names no key (a time, a URL)
  }
  return {};
}

RunSearch parseRunSearch(std::string_view text, double now) {
  RunSearch search;
  for (const std::string& term : splitTerms(text)) {
    std::string problem = applySearchTerm(search.filter, term, now);
    if (!problem.empty()) search.problems.push_back(std::move(problem));
  }
  return search;
}

}  // namespace ringmaster::storage
