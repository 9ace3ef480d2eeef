#include "server/checkpoint.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "proto/ps.pb.h"
#include "rpc/wire.h"

namespace ps {

absl::StatusOr<std::string> EncodeCheckpoint(const Shard& shard) {
  ASSIGN_OR_RETURN(ShardState state, shard.ExportState());
  v1::ShardSnapshot snap;
  snap.set_shard_id(shard.options().shard_id);
  snap.set_num_shards(shard.options().num_shards);
  ModelSpecToProto(state.spec, snap.mutable_spec());
  snap.set_version(state.version);
  AppendFlatSlices(state.spec,
                   ShardSlices(state.spec, shard.options().num_shards, shard.options().shard_id),
                   state.weights, snap.mutable_weights());
  return snap.SerializeAsString();
}

absl::Status RestoreCheckpoint(absl::string_view bytes, Shard* shard) {
  v1::ShardSnapshot snap;
  if (!snap.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("checkpoint does not parse as a ps.v1.ShardSnapshot");
  }
  const ShardOptions& o = shard->options();
  if (snap.shard_id() != o.shard_id || snap.num_shards() != o.num_shards) {
    return absl::InvalidArgumentError(absl::StrCat(
        "checkpoint is of shard ", snap.shard_id(), " of ", snap.num_shards(),
        ", this is shard ", o.shard_id, " of ", o.num_shards));
  }
  ShardState state;
  state.spec = ModelSpecFromProto(snap.spec());
  RETURN_IF_ERROR(ValidateModelSpec(state.spec, o.spec_limits));
  state.version = snap.version();
  SliceAssembler::Options ao;
  ao.what = "checkpoint";
  SliceAssembler assembler(MakeSliceLayout(state.spec, o.num_shards, o.shard_id), ao);
  state.weights.resize(assembler.layout().num_elements);
  for (const v1::TensorSlice& w : snap.weights()) {
    const RawTensorSlice slice{w.name(), {w.shape().begin(), w.shape().end()}, w.offset(),
                               w.length(), {w.data()}};
    RETURN_IF_ERROR(assembler.Add(slice, [&state](const SliceRange& r) -> absl::StatusOr<float*> {
      return state.weights.data() + r.flat_offset;
    }));
  }
  RETURN_IF_ERROR(assembler.Finish());
  return shard->RestoreState(state);
}

}  // namespace ps
