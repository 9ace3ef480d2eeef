// VersionedWeights: a shard's parameters as one versioned value: the layout
// of its slices, the weights (one flat float32 buffer in layout order), the
// optimizer that updates them and its state, and the version.
//
// Install replaces all of them at once (an init, a worker's copy, a
// checkpoint); ApplyMean applies one update and advances the version by
// one. Snapshot hands out an immutable view (server/core/weights_snapshot.h):
// an update never writes into a buffer a snapshot still holds, it writes a
// copy instead (copy on write), so a reader never sees a half-applied
// update. Buffers come from a pool and go back there when the last
// snapshot lets go.
//
// Not thread-safe: the owner calls every method under its lock. The copy on
// write counts on that: Snapshot, the only way to a new reference, runs
// under the same lock as ApplyMean. Snapshots are safe to read anywhere.
#ifndef PS_SERVER_CORE_VERSIONED_WEIGHTS_H_
#define PS_SERVER_CORE_VERSIONED_WEIGHTS_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/optimizer.h"
#include "common/slice_assembler.h"
#include "server/core/buffer_pool.h"
#include "server/core/shard_state.h"
#include "server/core/stats.h"
#include "server/core/weights_snapshot.h"

namespace ps {

class VersionedWeights {
 public:
  // Empty (no parameters, an empty layout, version 0). `shard_id` names the
  // shard in errors. `version_gauge`, if not null, is kept equal to the
  // version; borrowed.
  explicit VersionedWeights(int shard_id, Gauge* version_gauge = nullptr);

  // `values` (every slice of `layout` exactly once; all checked before any
  // is copied) as one flat buffer in layout order. Errors from
  // SliceAssembler, as `options` words them.
  static absl::StatusOr<std::vector<float>> Assemble(
      const std::shared_ptr<const ShardLayout>& layout, const std::vector<RawTensorSlice>& values,
      const SliceAssembler::Options& options);

  // Whether parameters were installed (an init, a copy or a checkpoint).
  bool initialized() const { return initialized_; }
  int64_t version() const { return version_; }
  // Never null; empty until initialized.
  const std::shared_ptr<const ShardLayout>& layout() const { return layout_; }
  // The weights at the current version. REQUIRES: initialized().
  WeightsSnapshot Snapshot() const { return WeightsSnapshot{version_, layout_, weights_}; }

  // Makes `layout`, `weights` and `optimizer` the parameters at `version`.
  // A null `optimizer` keeps the current one with its state (for the same
  // spec). INVALID_ARGUMENT if `weights` is not the layout's size, and
  // FAILED_PRECONDITION for a null optimizer with none installed or one of
  // another size; a failure changes nothing.
  absl::Status Install(std::shared_ptr<const ShardLayout> layout, std::vector<float> weights,
                       std::unique_ptr<Optimizer> optimizer, int64_t version);

  // Applies the mean of `grads` (each of the layout's size; none: only the
  // version moves) with the optimizer as step version + 1, its learning
  // rate times `lr_scale` (> 0), and advances the version by one.
  // REQUIRES: initialized().
  void ApplyMean(const std::vector<std::vector<float>>& grads, double lr_scale = 1.0);

  // Fills the parameters' part of `state`: spec, version, a copy of the
  // weights, the optimizer's name and state. FAILED_PRECONDITION before
  // anything is installed; an error of Optimizer::SaveState.
  absl::Status ExportTo(ShardState* state) const;

 private:
  const int shard_id_;
  Gauge* const version_gauge_;
  bool initialized_ = false;
  std::shared_ptr<const ShardLayout> layout_;
  int64_t version_ = 0;
  // Replaced, not mutated, while a snapshot may still hold it.
  std::shared_ptr<std::vector<float>> weights_;
  const std::shared_ptr<BufferPool> pool_ = BufferPool::Create(2);
  std::unique_ptr<Optimizer> optimizer_;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_VERSIONED_WEIGHTS_H_
