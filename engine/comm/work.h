// Work: the handle of one asynchronous communicator operation, as torch.distributed's Work.
// wait() blocks until the operation finished (rethrowing its error) or the given timeout passed;
// isCompleted() never blocks.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

namespace ringmaster {

class Work {
 public:
  Work(std::string what, std::chrono::milliseconds default_timeout);

  // True once the operation succeeded or failed.
  bool isCompleted() const;
  // True once the operation succeeded.
  bool isSuccess() const;
  // Waits for the operation; throws its error if it failed, or a kTimeout error naming the
  // operation when `timeout` (default: the communicator's timeout plus a margin) passes first.
  void wait(std::optional<std::chrono::milliseconds> timeout = std::nullopt);

  // How long the operation itself ran (on the device for NCCL, on the host for Gloo), set when
  // it completed successfully; nullopt before.
  std::optional<double> durationMs() const;
  // Of durationMs(), the time spent waiting for a peer rather than transferring, when the backend
  // can tell (a Gloo receive: until its sender launched); nullopt otherwise.
  std::optional<double> waitMs() const;

  // For the communicator: marks the operation finished; the first outcome stands.
  void complete(std::optional<double> duration_ms = std::nullopt,
                std::optional<double> wait_ms = std::nullopt);
  void fail(std::exception_ptr error);
  const std::string& what() const { return what_; }

 private:
  std::string what_;  // "all_reduce #12 on world"
  std::chrono::milliseconds default_timeout_;
  mutable std::mutex mutex_;
  std::condition_variable done_cv_;
  bool done_ = false;
  std::exception_ptr error_;
  std::optional<double> duration_ms_;
  std::optional<double> wait_ms_;
};

using WorkPtr = std::shared_ptr<Work>;

}  // namespace ringmaster
