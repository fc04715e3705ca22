// SeqRanges: the sequence numbers of one rank's stored events, as disjoint ranges of consecutive
// numbers, and which ranges changed since they were last written. An in-order stream is one range,
// so idempotence costs one row per rank and batch, not one per event (the seq_ranges table).
#pragma once

#include <cstdint>
#include <iterator>
#include <map>
#include <set>

namespace ringmaster::storage {

class SeqRanges {
 public:
  // A range already in the database.
  void load(uint64_t first, uint64_t last) { ranges_[first] = last; }

  // Adds `seq`; false when it was there already (the event was stored before).
  bool insert(uint64_t seq) {
    auto next = ranges_.upper_bound(seq);  // the first range starting after seq
    auto previous = next == ranges_.begin() ? ranges_.end() : std::prev(next);
    if (previous != ranges_.end() && previous->second >= seq) return false;
    const bool extends_previous = previous != ranges_.end() && previous->second + 1 == seq;
    const bool meets_next = next != ranges_.end() && next->first == seq + 1;
    if (meets_next) {
      const uint64_t last = next->second;
      erased_.insert(next->first);
      ranges_.erase(next);
      if (extends_previous) {
        previous->second = last;
        changed_.insert(previous->first);
      } else {
        ranges_[seq] = last;
        changed_.insert(seq);
      }
    } else if (extends_previous) {
      previous->second = seq;
      changed_.insert(previous->first);
    } else {
      ranges_[seq] = seq;
      changed_.insert(seq);
    }
    return true;
  }

  // Hands over what changed since the last call: erase(first) for each range that no longer
  // starts there, then write(first, last) for each range added or grown.
  template <typename Erase, typename Write>
  void drainChanges(Erase&& erase, Write&& write) {
    for (uint64_t first : erased_)
      if (!ranges_.contains(first)) erase(first);
    for (uint64_t first : changed_)
      if (auto it = ranges_.find(first); it != ranges_.end()) write(it->first, it->second);
    erased_.clear();
    changed_.clear();
  }

  size_t rangeCount() const { return ranges_.size(); }

 private:
  std::map<uint64_t, uint64_t> ranges_;  // first -> last, disjoint and not adjacent
  std::set<uint64_t> changed_, erased_;  // by first seq, since the last drainChanges
};

}  // namespace ringmaster::storage
