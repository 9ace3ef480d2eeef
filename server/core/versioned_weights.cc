#include "server/core/versioned_weights.h"

#include <algorithm>
#include <atomic>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ps {

VersionedWeights::VersionedWeights(int shard_id, Gauge* version_gauge)
    : shard_id_(shard_id),
      version_gauge_(version_gauge), layout_(std::make_shared<ShardLayout>()) {}

absl::StatusOr<std::vector<float>> VersionedWeights::Assemble(
    const std::shared_ptr<const ShardLayout>& layout, const std::vector<RawTensorSlice>& values,
    const SliceAssembler::Options& options) {
  SliceAssembler assembler(layout, options);
  RETURN_IF_ERROR(assembler.Validate(values));
  std::vector<float> flat(layout->num_elements);
  for (const RawTensorSlice& v : values) {
    RETURN_IF_ERROR(assembler.Add(v, [&](const SliceRange& r) -> absl::StatusOr<float*> {
      return flat.data() + r.flat_offset;
    }));
  }
  return flat;
}

absl::Status VersionedWeights::Install(std::shared_ptr<const ShardLayout> layout,
                                       std::vector<float> weights,
                                       std::unique_ptr<Optimizer> optimizer, int64_t version) {
  if (static_cast<int64_t>(weights.size()) != layout->num_elements) {
    return absl::InvalidArgumentError(absl::StrCat("state has ", weights.size(),
                                                   " elements but shard ", shard_id_, " owns ",
                                                   layout->num_elements));
  }
  if (optimizer == nullptr &&
      (optimizer_ == nullptr || layout->num_elements != layout_->num_elements)) {
    return absl::FailedPreconditionError("no optimizer state that fits the new parameters");
  }
  if (optimizer != nullptr) optimizer_ = std::move(optimizer);
  layout_ = std::move(layout);
  weights_ = pool_->Share(std::move(weights));
  pool_->Clear();  // the spare buffers may be of the old size
  version_ = version;
  if (version_gauge_ != nullptr) version_gauge_->Set(version_);
  initialized_ = true;
  return absl::OkStatus();
}

void VersionedWeights::ApplyMean(const std::vector<std::vector<float>>& grads,
                                 double lr_scale) {
  // Copy on write: a reader may still be sending the current buffer. New
  // references are only taken under the owner's lock, so a count of 1 means
  // nobody else holds it; the fence orders the last reader's reads before
  // our writes.
  if (weights_.use_count() > 1) {
    std::vector<float> copy = pool_->Take(weights_->size());
    std::copy(weights_->begin(), weights_->end(), copy.begin());
    weights_ = pool_->Share(std::move(copy));
  } else {
    std::atomic_thread_fence(std::memory_order_acquire);
  }
  std::vector<const float*> data;
  data.reserve(grads.size());
  for (const std::vector<float>& g : grads) data.push_back(g.data());
  ApplyMeanInParallel(optimizer_.get(), /*step=*/version_ + 1, lr_scale, data, weights_->size(),
                      weights_->data());
  ++version_;
  if (version_gauge_ != nullptr) version_gauge_->Set(version_);
}

absl::Status VersionedWeights::ExportTo(ShardState* state) const {
  if (!initialized_) {
    return absl::FailedPreconditionError(
        absl::StrCat("shard ", shard_id_, " has no parameters to export"));
  }
  state->spec = layout_->spec;
  state->version = version_;
  state->weights = *weights_;
  state->optimizer = optimizer_->name();
  ASSIGN_OR_RETURN(state->optimizer_state, optimizer_->SaveState());
  return absl::OkStatus();
}

}  // namespace ps
