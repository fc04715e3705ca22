// Slurm's job states read from squeue and sacct, and the run status each maps to.
#include "slurm/slurm_state.h"

#include <algorithm>
#include <array>
#include <charconv>

#include <fmt/format.h>
#include <nlohmann/json.hpp>

#include "core/error.h"

namespace ringmaster::slurm {
namespace {

struct StateMapping {
  std::string_view state, status, description;
  bool final;
};

// Slurm's job states (squeue(1) "JOB STATE CODES") as torchx's Slurm scheduler maps them.
constexpr std::array kStates = {
    StateMapping{"PENDING", "pending", "waiting in the queue", false},
    StateMapping{"CONFIGURING", "pending", "its nodes are being configured", false},
    StateMapping{"REQUEUED", "pending", "requeued", false},
    StateMapping{"REQUEUE_HOLD", "pending", "requeued and held", false},
    StateMapping{"REQUEUE_FED", "pending", "requeued by the federation", false},
    StateMapping{"RESIZING", "pending", "being resized", false},
    StateMapping{"SUSPENDED", "pending", "suspended", false},
    StateMapping{"RUNNING", "running", "running", false},
    StateMapping{"COMPLETING", "running", "completing", false},
    StateMapping{"STOPPED", "running", "stopped (SIGSTOP)", false},
    StateMapping{"SIGNALING", "running", "being signalled", false},
    StateMapping{"STAGE_OUT", "running", "staging out", false},
    StateMapping{"COMPLETED", "completed", "completed", true},
    StateMapping{"CANCELLED", "cancelled", "cancelled (scancel)", true},
    StateMapping{"PREEMPTED", "cancelled", "preempted by a job of higher priority", true},
    StateMapping{"FAILED", "failed", "failed (a non-zero exit code)", true},
    StateMapping{"TIMEOUT", "failed", "timed out: it reached its time limit", true},
    StateMapping{"NODE_FAIL", "failed", "a node of it failed", true},
    StateMapping{"OUT_OF_MEMORY", "failed", "out of memory", true},
    StateMapping{"BOOT_FAIL", "failed", "a node failed to boot", true},
    StateMapping{"DEADLINE", "failed", "its deadline passed", true},
    StateMapping{"SPECIAL_EXIT", "failed", "held after a special exit", true},
    StateMapping{"REVOKED", "cancelled", "revoked by the federation", true},
};

// sacct and squeue may add flags after the word ("CANCELLED by 0", "FAILED+").
std::string_view stateWord(std::string_view state) {
  const size_t end = state.find_first_of(" +");
  return end == std::string_view::npos ? state : state.substr(0, end);
}

const StateMapping* findState(std::string_view state) {
  const std::string_view word = stateWord(state);
  const auto found = std::find_if(kStates.begin(), kStates.end(),
                                  [&](const StateMapping& m) { return m.state == word; });
  return found == kStates.end() ? nullptr : &*found;
}

std::vector<std::string_view> splitFields(std::string_view line, char separator) {
  std::vector<std::string_view> fields;
  for (size_t start = 0;;) {
    const size_t end = line.find(separator, start);
    fields.push_back(line.substr(start, end - start));
    if (end == std::string_view::npos) return fields;
    start = end + 1;
  }
}

std::vector<std::string_view> lines(std::string_view text) {
  std::vector<std::string_view> out;
  for (std::string_view line : splitFields(text, '\n')) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (!line.empty()) out.push_back(line);
  }
  return out;
}

std::string reasonOf(std::string_view reason) {
  return reason == "None" || reason == "(null)" ? std::string() : std::string(reason);
}

std::optional<int> parseInt(std::string_view text) {
  int value = 0;
  const auto [end, error] = std::from_chars(text.data(), text.data() + text.size(), value);
  if (error != std::errc() || end != text.data() + text.size()) return std::nullopt;
  return value;
}

}  // namespace

std::string_view runStatusOfSlurmState(std::string_view state) {
  const StateMapping* mapping = findState(state);
  return mapping != nullptr ? mapping->status : "failed";
}

bool isFinalSlurmState(std::string_view state) {
  const StateMapping* mapping = findState(state);
  return mapping == nullptr || mapping->final;
}

std::string describeSlurmState(const SlurmJobState& state) {
  const StateMapping* mapping = findState(state.state);
  std::string text = fmt::format("Slurm job {} {}", state.job_id,
                                 mapping != nullptr ? mapping->description : "ended");
  text += fmt::format(" ({}", state.state);
  if (!state.reason.empty()) text += fmt::format(", {}", state.reason);
  text += ")";
  if (!state.nodes.empty()) text += fmt::format(" on {}", state.nodes);
  if (state.signal.value_or(0) != 0) text += fmt::format(", signal {}", *state.signal);
  return text;
}

std::optional<SlurmJobState> parseSqueueJson(std::string_view text, std::string_view job_id) {
  nlohmann::json document;
  try {
    document = nlohmann::json::parse(text);
  } catch (const nlohmann::json::exception& e) {
    RM_THROW(kFormat, fmt::format("squeue --json: not JSON ({})", e.what()));
  }
  if (!document.is_object() || !document.contains("jobs") || !document["jobs"].is_array())
    RM_THROW(kFormat, "squeue --json: no \"jobs\" list in its answer");
  // squeue 22.05 lists every job with --json, whatever --jobs says: the job is looked up here.
  for (const nlohmann::json& job : document["jobs"]) {
    if (!job.is_object() || !job.contains("job_id")) continue;
    const nlohmann::json& id = job["job_id"];
    const std::string id_text = id.is_number()   ? std::to_string(id.get<int64_t>())
                                : id.is_string() ? id.get<std::string>()
                                                 : std::string();
    if (id_text != job_id) continue;
    SlurmJobState state{.job_id = id_text};
    // The state is a string up to 23.02, a list of words after it.
    const nlohmann::json& job_state = job.value("job_state", nlohmann::json());
    if (job_state.is_string()) {
      state.state = job_state.get<std::string>();
    } else if (job_state.is_array() && !job_state.empty() && job_state[0].is_string()) {
      state.state = job_state[0].get<std::string>();
    }
    if (state.state.empty())
      RM_THROW(kFormat, fmt::format("squeue --json: job {} has no job_state", job_id));
    if (job.contains("state_reason") && job["state_reason"].is_string())
      state.reason = reasonOf(job["state_reason"].get<std::string>());
    if (job.contains("nodes") && job["nodes"].is_string())
      state.nodes = job["nodes"].get<std::string>();
    return state;
  }
  return std::nullopt;
}

std::optional<SlurmJobState> parseSqueueText(std::string_view text, std::string_view job_id) {
  for (std::string_view line : lines(text)) {
    const std::vector<std::string_view> fields = splitFields(line, '|');
    if (fields.size() < 4 || fields[0] != job_id) continue;
    return SlurmJobState{.job_id = std::string(fields[0]),
                         .state = std::string(stateWord(fields[1])),
                         .reason = reasonOf(fields[2]),
                         .nodes = std::string(fields[3])};
  }
  return std::nullopt;
}

std::optional<SlurmJobState> parseSqueueSteps(std::string_view text, std::string_view step_id) {
  for (std::string_view line : lines(text)) {
    const std::vector<std::string_view> fields = splitFields(line, '|');
    if (fields.size() < 2 || fields[0] != step_id) continue;
    return SlurmJobState{
        .job_id = std::string(fields[0]), .state = "RUNNING", .nodes = std::string(fields[1])};
  }
  return std::nullopt;
}

std::optional<SlurmJobState> parseSacct(std::string_view text, std::string_view job_id) {
  for (std::string_view line : lines(text)) {
    const std::vector<std::string_view> fields = splitFields(line, '|');
    // The allocation's line, not its steps' (ID.batch, ID.0).
    if (fields.size() < 4 || fields[0] != job_id) continue;
    SlurmJobState state{.job_id = std::string(fields[0]),
                        .state = std::string(stateWord(fields[1])),
                        .nodes = fields[3] == "None assigned" || fields[3] == "(null)"
                                     ? ""
                                     : std::string(fields[3])};
    const std::vector<std::string_view> code = splitFields(fields[2], ':');
    if (code.size() == 2) {
      state.exit_code = parseInt(code[0]);
      state.signal = parseInt(code[1]);
    }
    return state;
  }
  return std::nullopt;
}

std::string parseSbatchJobId(std::string_view text) {
  std::string_view line = text.substr(0, text.find('\n'));
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  const std::string_view id = line.substr(0, line.find(';'));
  const bool digits =
      !id.empty() && std::all_of(id.begin(), id.end(), [](char c) { return c >= '0' && c <= '9'; });
  if (!digits)
    RM_THROW(kFormat, fmt::format("sbatch --parsable answered \"{}\", not a job id",
                                  std::string(text.substr(0, 200))));
  return std::string(id);
}

}  // namespace ringmaster::slurm
