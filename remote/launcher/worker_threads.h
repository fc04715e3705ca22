// A bounded number of threads for work over many hosts (issue 32, point 4): `runOnWorkers` runs
// any number of tasks on at most a fixed number of threads, as pdsh's fanout and Ansible's forks
// do, and `startThreads` starts long-lived ones. A thread the system refuses (the limit on
// processes and threads, `ulimit -u`, or memory) is an Error naming the cause, never an abort:
// the threads already started are made to end and joined first, none is left joinable.
#pragma once

#include <cstddef>
#include <functional>
#include <string_view>
#include <thread>
#include <vector>

namespace ringmaster {

// Starts one thread running `body`. The default is std::thread; tests substitute one that fails
// as the system does at its thread limit (std::system_error).
using ThreadStarter = std::function<std::thread(std::function<void()> body)>;

// Threads a launch uses at once by default (pdsh's fanout is 32, ClusterShell's 64).
inline constexpr std::size_t kDefaultWorkerThreads = 64;

// Starts body(0) ... body(count - 1), each on its own thread, appended to `threads`. When the
// system refuses one, `stop` is called (it must make the started bodies return), the threads
// started here are joined and removed from `threads`, and kUnavailable is thrown naming `purpose`
// ("to connect to the hosts"), how many had started and the system's reason.
void startThreads(std::size_t count, const std::function<void(std::size_t)>& body,
                  std::vector<std::thread>& threads, std::string_view purpose,
                  const std::function<void()>& stop = {}, const ThreadStarter& start = {});

// Runs task(0) ... task(count - 1) on at most `workers` threads, each taking the next index when
// it is done with one, and returns once every task has run. A task's exception is rethrown here
// (the first one) once all threads have ended. When a thread cannot be started, the tasks not yet
// taken are not run, those running finish, and kUnavailable is thrown as by startThreads.
void runOnWorkers(std::size_t count, std::size_t workers,
                  const std::function<void(std::size_t)>& task, std::string_view purpose,
                  const ThreadStarter& start = {});

}  // namespace ringmaster
