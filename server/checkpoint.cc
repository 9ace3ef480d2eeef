#include "server/checkpoint.h"

#include "absl/strings/str_cat.h"
#include "common/partition.h"
#include "common/slice_assembler.h"
#include "common/status_macros.h"
#include "proto/ps.pb.h"
#include "rpc/wire.h"

namespace ps {

std::string EncodeShardState(const ShardState& state) {
  v1::ShardSnapshot snap;
  snap.set_shard_id(state.shard_id);
  snap.set_num_shards(state.num_shards);
  ModelSpecToProto(state.spec, snap.mutable_spec());
  snap.set_version(state.version);
  AppendFlatSlices(state.spec, ShardSlices(state.spec, state.num_shards, state.shard_id),
                   state.weights, snap.mutable_weights());
  snap.set_num_workers(state.num_workers);
  snap.mutable_workers_seen()->Add(state.workers_seen.begin(), state.workers_seen.end());
  snap.set_optimizer(state.optimizer);
  snap.set_optimizer_state(state.optimizer_state);
  snap.mutable_incarnation()->set_run_id(state.incarnation.run_id);
  snap.mutable_incarnation()->set_start(state.incarnation.start);
  snap.mutable_last_seq()->Add(state.last_seq.begin(), state.last_seq.end());
  return snap.SerializeAsString();
}

absl::StatusOr<ShardState> DecodeShardState(absl::string_view bytes, const SpecLimits& limits) {
  v1::ShardSnapshot snap;
  if (!snap.ParseFromArray(bytes.data(), static_cast<int>(bytes.size()))) {
    return absl::InvalidArgumentError("checkpoint does not parse as a ps.v1.ShardSnapshot");
  }
  if (snap.num_shards() < 1 || snap.shard_id() < 0 || snap.shard_id() >= snap.num_shards()) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint names shard ", snap.shard_id(),
                                                   " of ", snap.num_shards()));
  }
  if (snap.num_workers() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("checkpoint names num_workers ", snap.num_workers()));
  }
  ShardState state;
  state.shard_id = snap.shard_id();
  state.num_shards = snap.num_shards();
  state.num_workers = snap.num_workers();
  state.workers_seen.assign(snap.workers_seen().begin(), snap.workers_seen().end());
  state.spec = ModelSpecFromProto(snap.spec());
  RETURN_IF_ERROR(ValidateModelSpec(state.spec, limits));
  state.version = snap.version();
  state.optimizer = snap.optimizer();
  state.optimizer_state = snap.optimizer_state();
  state.incarnation = Incarnation{snap.incarnation().run_id(), snap.incarnation().start()};
  if (snap.last_seq_size() > state.num_workers) {
    return absl::InvalidArgumentError(absl::StrCat("checkpoint has ", snap.last_seq_size(),
                                                   " push seqs for ", state.num_workers,
                                                   " workers"));
  }
  state.last_seq.assign(snap.last_seq().begin(), snap.last_seq().end());
  SliceAssembler::Options ao;
  ao.what = "checkpoint";
  SliceAssembler assembler(MakeSliceLayout(state.spec, state.num_shards, state.shard_id), ao);
  state.weights.resize(assembler.layout().num_elements);
  for (const v1::TensorSlice& w : snap.weights()) {
    const RawTensorSlice slice{w.name(), {w.shape().begin(), w.shape().end()}, w.offset(),
                               w.length(), {w.data()}};
    RETURN_IF_ERROR(assembler.Add(slice, [&state](const SliceRange& r) -> absl::StatusOr<float*> {
      return state.weights.data() + r.flat_offset;
    }));
  }
  RETURN_IF_ERROR(assembler.Finish());
  return state;
}

absl::StatusOr<std::string> EncodeCheckpoint(const Shard& shard) {
  ASSIGN_OR_RETURN(ShardState state, shard.ExportState());
  return EncodeShardState(state);
}

absl::Status RestoreCheckpoint(absl::string_view bytes, Shard* shard) {
  ASSIGN_OR_RETURN(ShardState state, DecodeShardState(bytes, shard->options().spec_limits));
  return shard->LoadCheckpoint(state);
}

}  // namespace ps
