// The engine's single error type and its checking macros (policy: docs/errors.md).
// Recoverable faults throw ringmaster::Error with a kind and the file:line that raised it; broken
// invariants go through RM_ENFORCE. Nothing in the libraries exits the process: only app/ does.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

namespace ringmaster {

enum class ErrorKind {
  kInvalidArgument,  // a caller passed something malformed (shape mismatch, bad option)
  kSpec,             // a job spec failed validation
  kIo,               // a file or stream could not be read or written
  kFormat,           // a file was read but its content is not the format it claims
  kCuda,             // a CUDA / cuBLAS call failed
  kComm,             // a peer, the network or a communication library (Gloo, NCCL) failed
  kTimeout,          // an operation did not finish within its timeout
  kUnavailable,      // the build or the machine lacks what was asked for (CUDA, a strategy)
  kInternal,         // an invariant of ours broke: a bug
};

std::string_view errorKindName(ErrorKind kind);

class Error : public std::runtime_error {
 public:
  Error(ErrorKind kind, std::string message, const char* file, int line);

  ErrorKind kind() const { return kind_; }
  // The message without the source location, for users.
  const std::string& message() const { return message_; }
  // "engine/nn/linear.cpp:42", for logs and bug reports.
  const std::string& where() const { return where_; }

 private:
  ErrorKind kind_;
  std::string message_;
  std::string where_;
};

[[noreturn]] void throwError(ErrorKind kind, std::string message, const char* file, int line);

}  // namespace ringmaster

#define RM_THROW(kind, message) \
  ::ringmaster::throwError(::ringmaster::ErrorKind::kind, (message), __FILE__, __LINE__)

// An invariant that only a bug can break.
#define RM_ENFORCE(condition, message)                                                   \
  do {                                                                                   \
    if (!(condition)) {                                                                  \
      ::ringmaster::throwError(::ringmaster::ErrorKind::kInternal,                       \
                               std::string("enforce failed: " #condition ": ") + (message), \
                               __FILE__, __LINE__);                                      \
    }                                                                                    \
  } while (0)

// A precondition on a caller's argument.
#define RM_CHECK_ARG(condition, message)                                                  \
  do {                                                                                    \
    if (!(condition)) {                                                                   \
      ::ringmaster::throwError(::ringmaster::ErrorKind::kInvalidArgument, (message), __FILE__, \
                               __LINE__);                                                 \
    }                                                                                     \
  } while (0)
