// launch.env_file: the NAME=VALUE file each host's agent reads before it starts the workers, and
// the environment a job adds to its workers (launch.env, then that file). The file's values are
// never written anywhere by Ringmaster: not in the spec, the database, telemetry or a message.
#pragma once

#include <map>
#include <string>
#include <string_view>

#include "spec/job_spec.h"

namespace ringmaster {

// The largest env_file read; beyond it the file is refused unread.
inline constexpr uint64_t kMaxEnvFileBytes = uint64_t{1} << 20;

// The variables of an env_file's text (`path` names it in messages): one NAME=VALUE per line,
// the value everything after the first '=' taken as it is (no quotes, no expansion, as docker's
// --env-file; a '\r' before the line break is dropped); blank lines and lines whose first
// non-blank character is '#' are skipped. Names follow checkEnvName with secret-looking names
// allowed; a name given twice, a line without '=' and more than kMaxEnvVariables variables are
// errors. Throws Error kSpec "launch.env_file PATH:LINE: why", never quoting a value.
std::map<std::string, std::string> parseEnvFile(std::string_view text, const std::string& path);

// parseEnvFile of the file at `path` (absolute, or relative to this process's working
// directory). Throws kIo naming the file when it cannot be read, kSpec when it is malformed or
// larger than kMaxEnvFileBytes.
std::map<std::string, std::string> readEnvFile(const std::string& path);

// What a job adds to its workers' environment: launch.env, then launch.env_file's variables
// (read now; they win over launch.env's of the same name).
std::map<std::string, std::string> jobEnvironment(const LaunchSpec& launch);

}  // namespace ringmaster
