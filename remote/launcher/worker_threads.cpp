// Bounded worker threads: the refused thread turned into an Error after the started ones are
// joined (a std::thread destroyed while joinable would terminate the process).
#include "launcher/worker_threads.h"

#include <algorithm>
#include <atomic>
#include <exception>
#include <mutex>
#include <system_error>

#include <fmt/format.h>

#include "core/error.h"

namespace ringmaster {

void startThreads(std::size_t count, const std::function<void(std::size_t)>& body,
                  std::vector<std::thread>& threads, std::string_view purpose,
                  const std::function<void()>& stop, const ThreadStarter& start) {
  const std::size_t before = threads.size();
  try {
    for (std::size_t i = 0; i < count; ++i) {
      std::function<void()> run = [body, i] { body(i); };  // a copy: it outlives this call
      threads.push_back(start ? start(std::move(run)) : std::thread(std::move(run)));
    }
  } catch (const std::system_error& e) {
    const std::size_t started = threads.size() - before;
    if (stop) stop();
    for (std::size_t i = before; i < threads.size(); ++i) threads[i].join();
    threads.resize(before);
    RM_THROW(kUnavailable,
             fmt::format("cannot start a thread {} ({} of {} started): {} (the limit on processes "
                         "and threads, ulimit -u, or memory; fewer threads at once may do)",
                         purpose, started, count, e.code().message()));
  }
}

void runOnWorkers(std::size_t count, std::size_t workers,
                  const std::function<void(std::size_t)>& task, std::string_view purpose,
                  const ThreadStarter& start) {
  std::atomic<std::size_t> next{0};
  std::atomic<bool> stopped{false};
  std::mutex mutex;
  std::exception_ptr first_error;
  const auto work = [&](std::size_t) {
    for (std::size_t i; !stopped && (i = next++) < count;) {
      try {
        task(i);
      } catch (...) {
        std::lock_guard<std::mutex> lock(mutex);
        if (!first_error) first_error = std::current_exception();
      }
    }
  };
  std::vector<std::thread> threads;
  startThreads(
      std::min(count, std::max<std::size_t>(workers, 1)), work, threads, purpose,
      [&] { stopped = true; }, start);
  for (auto& thread : threads) thread.join();
  if (first_error) std::rethrow_exception(first_error);
}

}  // namespace ringmaster
