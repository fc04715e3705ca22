// The Gloo backend: CPU tensors over Gloo's TCP transport (Debian's libgloo). Collectives use
// Gloo's algorithms with our reduce kernels (so every ReduceOp and dtype works); reduce_scatter is
// a ring over Gloo's unbound buffers (Gloo has none that takes arbitrary counts); send / recv are
// unbound-buffer transfers whose slot carries the tag.
#pragma once

#include <memory>
#include <mutex>
#include <set>
#include <string>

#include "comm/backend.h"

namespace gloo {
class Context;
namespace transport {
class Device;
class UnboundBuffer;
}  // namespace transport
}  // namespace gloo

namespace ringmaster {

struct GlooOptions {
  // The address the other ranks reach this rank at ("127.0.0.1" for one host), or a network
  // interface name (GLOO_SOCKET_IFNAME's meaning) when `interface` is set.
  std::string hostname = "127.0.0.1";
  std::string interface;
  std::chrono::milliseconds timeout{std::chrono::seconds(300)};
  // all_reduce: Gloo's ring moves the buffer in segments of at most this many bytes per message;
  // 0 chooses by size (docs/comm.md has the measurements behind the choice).
  size_t allreduce_segment_bytes = 0;
};

class GlooBackend : public Backend {
 public:
  // Connects this rank to the `size` ranks that rendezvous through `store` (a full TCP mesh).
  static std::unique_ptr<GlooBackend> connect(std::shared_ptr<Store> store, int rank, int size,
                                              const GlooOptions& options);
  ~GlooBackend() override;

  std::string name() const override { return "gloo"; }
  Device device() const override { return Device::cpu(); }
  std::unique_ptr<PendingOp> launch(const OpCall& call) override;
  void abort() override;
  std::unique_ptr<Backend> split(std::shared_ptr<Store> store, int group_rank,
                                 int group_size) override;

  // Whether all_reduce of `bytes` takes Gloo's ring (large buffers) or its BCUBE algorithm
  // (latency-bound small ones).
  static bool allreduceUsesRing(size_t bytes);
  // The segment size the ring all_reduce uses for a message of `bytes` over `ranks` ranks.
  static size_t allreduceSegmentBytes(size_t bytes, int ranks, size_t configured);

 private:
  class P2POp;
  GlooBackend(std::shared_ptr<gloo::transport::Device> device,
              std::shared_ptr<gloo::Context> context, GlooOptions options);
  void reduceScatterRing(const OpCall& call);
  void track(gloo::transport::UnboundBuffer* buffer, bool add);

  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  GlooOptions options_;
  std::mutex mutex_;
  std::set<gloo::transport::UnboundBuffer*> p2p_in_flight_;  // guarded by mutex_
  bool aborted_ = false;                                     // guarded by mutex_
};

}  // namespace ringmaster
