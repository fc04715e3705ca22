// The key-value store the ranks of a job rendezvous through, with PyTorch's c10d::Store semantics
// (set / get / add / wait / compare_set / delete_key / check / num_keys). Implementations:
// TcpStore (hosted by rank 0) and FileStore; PrefixStore scopes keys for a process group.
#pragma once

#include <chrono>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

namespace ringmaster {

using Bytes = std::vector<uint8_t>;
using Millis = std::chrono::milliseconds;

Bytes toBytes(const std::string& text);
std::string toString(const Bytes& bytes);
// add()'s arithmetic, shared by the stores: `current` (nullptr: the key is absent, counted as 0)
// plus `delta`; throws kInvalidArgument naming `key` when its value is not an integer.
int64_t addToStoredInteger(const Bytes* current, const std::string& key, int64_t delta);

class Store {
 public:
  virtual ~Store() = default;

  virtual void set(const std::string& key, const Bytes& value) = 0;
  // Blocks until `key` exists (at most timeout()), then returns its value.
  virtual Bytes get(const std::string& key) = 0;
  // Adds `delta` to the integer stored at `key` (absent counts as 0) and returns the new value.
  virtual int64_t add(const std::string& key, int64_t delta) = 0;
  // Sets `desired` when the current value equals `expected`, or when the key is absent and
  // `expected` is empty; returns the value the key holds afterwards (as c10d's compare_set).
  virtual Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) = 0;
  // Removes `key`; true when it existed.
  virtual bool deleteKey(const std::string& key) = 0;
  // True when every key exists, without waiting.
  virtual bool check(const std::vector<std::string>& keys) = 0;
  virtual int64_t numKeys() = 0;
  // Blocks until every key exists; throws a kTimeout error naming the missing keys after `timeout`.
  virtual void wait(const std::vector<std::string>& keys, Millis timeout) = 0;
  void wait(const std::vector<std::string>& keys) { wait(keys, timeout_); }

  Millis timeout() const { return timeout_; }
  void setTimeout(Millis timeout) { timeout_ = timeout; }

 protected:
  // wait() for stores without notifications: polls check() with backoff, then throws kTimeout
  // naming the keys still missing.
  void pollUntilPresent(const std::vector<std::string>& keys, Millis timeout);

  Millis timeout_{std::chrono::seconds(300)};
};

// Prepends "prefix/" to every key of an underlying store (the keys of one process group).
class PrefixStore : public Store {
 public:
  PrefixStore(std::string prefix, std::shared_ptr<Store> base);

  void set(const std::string& key, const Bytes& value) override;
  Bytes get(const std::string& key) override;
  int64_t add(const std::string& key, int64_t delta) override;
  Bytes compareSet(const std::string& key, const Bytes& expected, const Bytes& desired) override;
  bool deleteKey(const std::string& key) override;
  bool check(const std::vector<std::string>& keys) override;
  int64_t numKeys() override;
  void wait(const std::vector<std::string>& keys, Millis timeout) override;
  using Store::wait;

  const std::shared_ptr<Store>& base() const { return base_; }

 private:
  std::string scoped(const std::string& key) const { return prefix_ + "/" + key; }
  std::vector<std::string> scoped(const std::vector<std::string>& keys) const;

  std::string prefix_;
  std::shared_ptr<Store> base_;
};

}  // namespace ringmaster
