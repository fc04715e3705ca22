// Work handles.
#include "comm/work.h"

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

Work::Work(std::string what, std::chrono::milliseconds default_timeout)
    : what_(std::move(what)), default_timeout_(default_timeout) {}

bool Work::isCompleted() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_;
}

bool Work::isSuccess() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return done_ && !error_;
}

void Work::wait(std::optional<std::chrono::milliseconds> timeout) {
  auto limit = timeout.value_or(default_timeout_ + std::chrono::seconds(5));
  std::unique_lock<std::mutex> lock(mutex_);
  if (!done_cv_.wait_for(lock, limit, [&] { return done_; })) {
    RM_THROW(kTimeout, fmt::format("{}: not completed after waiting {} ms", what_, limit.count()));
  }
  if (error_) std::rethrow_exception(error_);
}

std::optional<double> Work::durationMs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return duration_ms_;
}

std::optional<double> Work::waitMs() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return wait_ms_;
}

void Work::complete(std::optional<double> duration_ms, std::optional<double> wait_ms) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;  // failed already, by an abort
    done_ = true;
    duration_ms_ = duration_ms;
    wait_ms_ = wait_ms;
  }
  done_cv_.notify_all();
}

void Work::fail(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (done_) return;  // the first outcome stands
    done_ = true;
    error_ = std::move(error);
  }
  done_cv_.notify_all();
}

}  // namespace ringmaster
