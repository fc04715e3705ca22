// PinnedToOneCpu: while alive, this process and every process it starts run on one CPU, as under
// `taskset -c`, so that a one-thread comparison measures ours and the anchor on the same core.
#pragma once

#include <sched.h>

namespace ringmaster::bench {

// Pins to the last CPU this process may use (away from CPU 0, where the kernel's housekeeping
// tends to run) and restores the previous set on destruction. Does nothing when `pin` is false
// (multi-threaded runs) or the affinity calls fail.
class PinnedToOneCpu {
 public:
  explicit PinnedToOneCpu(bool pin) {
    if (!pin || sched_getaffinity(0, sizeof saved_, &saved_) != 0) return;
    int last = -1;
    for (int cpu = 0; cpu < CPU_SETSIZE; ++cpu)
      if (CPU_ISSET(cpu, &saved_)) last = cpu;
    if (last < 0) return;
    cpu_set_t one;
    CPU_ZERO(&one);
    CPU_SET(last, &one);
    pinned_ = sched_setaffinity(0, sizeof one, &one) == 0;
  }
  ~PinnedToOneCpu() {
    if (pinned_) sched_setaffinity(0, sizeof saved_, &saved_);
  }
  PinnedToOneCpu(const PinnedToOneCpu&) = delete;
  PinnedToOneCpu& operator=(const PinnedToOneCpu&) = delete;

 private:
  cpu_set_t saved_{};
  bool pinned_ = false;
};

}  // namespace ringmaster::bench
