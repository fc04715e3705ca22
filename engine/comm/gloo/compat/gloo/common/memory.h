// Debian 12's libgloo-dev installs gloo/transport/tcp/pair.h but not the gloo/common/memory.h it
// includes. This stands in for it with the same class templates (non-owning pointers to unbound
// buffers), so that the pair's declaration compiles; Ringmaster only reads the pair's socket and
// mutex, which precede every member of these types.
#pragma once

#include <memory>

namespace gloo {

template <typename T>
class NonOwningPtr final {
 public:
  NonOwningPtr() = default;
  explicit NonOwningPtr(std::shared_ptr<T*> ptr) : ptr_(std::move(ptr)) {}

 private:
  std::shared_ptr<T*> ptr_;
};

template <typename T>
class WeakNonOwningPtr final {
 public:
  WeakNonOwningPtr() = default;

 private:
  std::weak_ptr<T*> ptr_;
};

}  // namespace gloo
