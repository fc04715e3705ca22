// Construction and naming of ringmaster::Error.
#include "core/error.h"

#include <cstring>

namespace ringmaster {

std::string_view errorKindName(ErrorKind kind) {
  switch (kind) {
    case ErrorKind::kInvalidArgument: return "invalid argument";
    case ErrorKind::kSpec: return "invalid spec";
    case ErrorKind::kIo: return "I/O error";
    case ErrorKind::kFormat: return "format error";
    case ErrorKind::kCuda: return "CUDA error";
    case ErrorKind::kComm: return "communication error";
    case ErrorKind::kTimeout: return "timeout";
    case ErrorKind::kUnavailable: return "unavailable";
    case ErrorKind::kInternal: return "internal error";
  }
  return "error";
}

namespace {
// Source paths are absolute in most builds; keep the part from the project's top folders on.
std::string shortPath(const char* file) {
  std::string_view path(file);
  for (std::string_view top : {"engine/", "remote/", "storage/", "ui/", "app/", "tests/"}) {
    if (auto pos = path.rfind(top); pos != std::string_view::npos) return std::string(path.substr(pos));
  }
  return std::string(path);
}
}  // namespace

Error::Error(ErrorKind kind, std::string message, const char* file, int line)
    : std::runtime_error(message),
      kind_(kind),
      message_(std::move(message)),
      where_(shortPath(file) + ":" + std::to_string(line)) {}

void throwError(ErrorKind kind, std::string message, const char* file, int line) {
  throw Error(kind, std::move(message), file, line);
}

}  // namespace ringmaster
