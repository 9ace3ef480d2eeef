// Gradient assembly: how one worker's pushed gradient gets from received
// bytes into a flat buffer that the shard can apply, copied once.
//
//   GradientPool      the shard's gradient buffers: recycled once applied,
//                     and at most max_pending out at once.
//   PushBuffer        one such buffer, counted as pending while held.
//   GradientAssembly  checks each chunk (common/slice_assembler.h) and
//                     copies it into a PushBuffer taken at the first good
//                     chunk, widening a bf16 chunk to float32 as it copies
//                     (the shard only ever sees float32); Finish yields an
//                     AssembledGradient.
//   AssembledGradient a complete gradient, what Shard::Push takes.
//
// A push starts with Shard::StartPush, which checks the worker, the version
// and the shard's state, and hands out a GradientAssembly for the shard's
// current layout. Knows nothing of gRPC.
//
// GradientPool is thread-safe; the others are not (one per call), and are
// move-only. A PushBuffer keeps its pool (and the metrics) alive.
#ifndef PS_SERVER_CORE_GRADIENT_H_
#define PS_SERVER_CORE_GRADIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/slice_assembler.h"
#include "server/core/buffer_pool.h"
#include "server/core/stats.h"
#include "server/core/weights_snapshot.h"

namespace ps {

class GradientPool;

// A gradient buffer of the shard's size, contents unspecified until written.
// Counts as a pending push until TakeValues or destruction.
class PushBuffer {
 public:
  PushBuffer() = default;
  PushBuffer(PushBuffer&& o) noexcept = default;
  PushBuffer& operator=(PushBuffer&& o) noexcept {
    Release();
    values_ = std::move(o.values_);
    pool_ = std::move(o.pool_);
    return *this;
  }
  ~PushBuffer() { Release(); }

  float* data() { return values_.data(); }
  const float* data() const { return values_.data(); }
  size_t size() const { return values_.size(); }

  // The values; the push no longer counts as pending.
  std::vector<float> TakeValues() &&;

 private:
  friend class GradientPool;
  void Release();

  std::vector<float> values_;
  std::shared_ptr<GradientPool> pool_;  // null once released
};

class GradientPool : public std::enable_shared_from_this<GradientPool> {
 public:
  // `name` ("shard 0") starts the limit message; at most `max_pending`
  // buffers are out at once; up to `max_spare` applied ones are kept.
  static std::shared_ptr<GradientPool> Create(std::string name, int max_pending, size_t max_spare,
                                              std::shared_ptr<ShardMetrics> metrics);

  // A buffer of n floats. RESOURCE_EXHAUSTED when max_pending are out.
  absl::StatusOr<PushBuffer> Take(size_t n);
  // Returns an applied gradient's buffer for reuse.
  void Give(std::vector<float> values) { buffers_->Give(std::move(values)); }
  // Frees the spare buffers (the shard's size changed).
  void Clear() { buffers_->Clear(); }

 private:
  friend class PushBuffer;
  GradientPool(std::string name, int max_pending, size_t max_spare,
               std::shared_ptr<ShardMetrics> metrics);

  const std::string name_;
  const int max_pending_;
  const std::shared_ptr<BufferPool> buffers_;
  const std::shared_ptr<ShardMetrics> metrics_;  // pending_pushes counts buffers out
};

// A complete gradient: every range of `layout` written into `values`.
struct AssembledGradient {
  int worker_id = 0;
  int64_t computed_version = 0;               // the version of the weights it was computed on
  std::shared_ptr<const ShardLayout> layout;  // the shard's layout at StartPush
  PushBuffer values;                          // flat, in layout order
};

class GradientAssembly {
 public:
  // Made by Shard::StartPush.
  GradientAssembly(int worker_id, int64_t computed_version,
                   std::shared_ptr<const ShardLayout> layout, SliceAssembler::Options options,
                   std::shared_ptr<GradientPool> pool);

  // Checks `chunk` and copies it into place; the first good chunk takes the
  // buffer from the pool. On error the assembly should be dropped.
  absl::Status Add(const RawTensorSlice& chunk);

  // A whole message's chunks (the unary transport): all of them are checked,
  // the ranges covered included, before the buffer is taken.
  absl::Status AddMessage(const std::vector<RawTensorSlice>& chunks);

  // The gradient, once every range was covered (else INVALID_ARGUMENT naming
  // a missing one). Takes the buffer if no chunk did (nothing to receive:
  // the shard owns no elements).
  absl::StatusOr<AssembledGradient> Finish() &&;

  // The buffer being written; null until a chunk took it.
  const float* data() const { return have_buffer_ ? buffer_.data() : nullptr; }

 private:
  absl::Status TakeBuffer();

  int worker_id_;
  int64_t computed_version_;
  std::shared_ptr<const ShardLayout> layout_;
  SliceAssembler assembler_;
  std::shared_ptr<GradientPool> pool_;
  PushBuffer buffer_;
  bool have_buffer_ = false;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_GRADIENT_H_
