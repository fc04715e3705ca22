// Byte helpers and PrefixStore.
#include "comm/store.h"

#include <algorithm>
#include <thread>

#include <fmt/format.h>
#include <fmt/ranges.h>

#include "core/error.h"

namespace ringmaster {

Bytes toBytes(const std::string& text) {
  return Bytes(text.begin(), text.end());
}
std::string toString(const Bytes& bytes) {
  return std::string(bytes.begin(), bytes.end());
}

int64_t addToStoredInteger(const Bytes* current, const std::string& key, int64_t delta) {
  int64_t value = 0;
  if (current != nullptr) {
    try {
      value = std::stoll(toString(*current));
    } catch (const std::exception&) {
      RM_THROW(kInvalidArgument,
               fmt::format("store: add on key '{}' whose value is not an integer", key));
    }
  }
  return value + delta;
}

void Store::pollUntilPresent(const std::vector<std::string>& keys, Millis timeout) {
  auto deadline = std::chrono::steady_clock::now() + timeout;
  auto backoff = std::chrono::microseconds(200);
  while (!check(keys)) {
    auto now = std::chrono::steady_clock::now();
    if (now >= deadline) {
      std::vector<std::string> missing;
      for (const auto& key : keys) {
        if (!check({key})) missing.push_back(key);
      }
      RM_THROW(kTimeout, fmt::format("store: timed out after {} ms waiting for key(s) {}",
                                     timeout.count(), fmt::join(missing, ", ")));
    }
    std::this_thread::sleep_for(
        std::min<std::chrono::steady_clock::duration>(backoff, deadline - now));
    backoff = std::min(backoff * 2, std::chrono::microseconds(20000));
  }
}

PrefixStore::PrefixStore(std::string prefix, std::shared_ptr<Store> base)
    : prefix_(std::move(prefix)), base_(std::move(base)) {
  timeout_ = base_->timeout();
}

std::vector<std::string> PrefixStore::scoped(const std::vector<std::string>& keys) const {
  std::vector<std::string> out;
  out.reserve(keys.size());
  for (const auto& key : keys) out.push_back(scoped(key));
  return out;
}

void PrefixStore::set(const std::string& key, const Bytes& value) {
  base_->set(scoped(key), value);
}

Bytes PrefixStore::get(const std::string& key) {
  base_->wait({scoped(key)}, timeout_);
  return base_->get(scoped(key));
}

int64_t PrefixStore::add(const std::string& key, int64_t delta) {
  return base_->add(scoped(key), delta);
}

Bytes PrefixStore::compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) {
  return base_->compareSet(scoped(key), expected, desired);
}

bool PrefixStore::deleteKey(const std::string& key) {
  return base_->deleteKey(scoped(key));
}

bool PrefixStore::check(const std::vector<std::string>& keys) {
  return base_->check(scoped(keys));
}

int64_t PrefixStore::numKeys() {
  return base_->numKeys();
}

void PrefixStore::wait(const std::vector<std::string>& keys, Millis timeout) {
  base_->wait(scoped(keys), timeout);
}

}  // namespace ringmaster
