#include "client/internal/shard_transport.h"

#include "absl/strings/str_cat.h"

namespace ps {

SliceValues TensorValues(const ConstTensorViews& values) {
  return [&values](const SliceRange& r) { return values[r.tensor_index].data() + r.offset; };
}

namespace {

SliceAssembler::Options PullOptions() {
  SliceAssembler::Options o;
  o.what = "pull";
  return o;
}

}  // namespace

WeightReader::WeightReader(int shard, std::shared_ptr<const SliceLayout> layout,
                           TensorViews weights)
    : shard_(shard), assembler_(std::move(layout), PullOptions()), weights_(std::move(weights)) {}

absl::Status WeightReader::Add(const std::vector<RawTensorSlice>& chunks) {
  const SliceAssembler::Destination into = [this](const SliceRange& r) -> absl::StatusOr<float*> {
    return weights_[r.tensor_index].data() + r.offset;
  };
  for (const RawTensorSlice& c : chunks) {
    if (absl::Status s = assembler_.Add(c, into); !s.ok()) return BadReply(s);
  }
  return absl::OkStatus();
}

absl::Status WeightReader::Finish() const {
  if (absl::Status s = assembler_.Finish(); !s.ok()) return BadReply(s);
  return absl::OkStatus();
}

absl::Status WeightReader::BadReply(const absl::Status& s) const {
  return absl::InternalError(
      absl::StrCat("shard ", shard_, " sent a malformed pull reply: ", s.message()));
}

void HoldShard(ClientState* state, int shard, const TensorViews& weights) {
  if (state->options.retry_timeout <= absl::ZeroDuration()) return;
  const SliceLayout& layout = *state->layouts[shard];
  std::vector<float>& held = state->held[shard];
  held.resize(layout.num_elements);
  for (const SliceRange& r : layout.slices) {
    const float* from = weights[r.tensor_index].data() + r.offset;
    std::copy(from, from + r.length, held.begin() + r.flat_offset);
  }
  state->held_version[shard] = state->shard_version[shard];
}

}  // namespace ps
