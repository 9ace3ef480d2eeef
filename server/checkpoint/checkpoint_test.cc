#include "server/checkpoint/checkpoint.h"
#include "server/core/test_shard_state.h"

#include <memory>

#include "absl/status/status.h"
#include "common/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/shard_test_util.h"
#include "proto/checkpoint.pb.h"
#include "server/core/shard.h"
#include "server/core/shard_state.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::unique_ptr<Shard> ShardFor(const ShardState& s) {
  ShardOptions o;
  o.shard_id = s.shard_id;
  o.num_shards = s.num_shards;
  o.num_workers = s.num_workers;
  auto shard = Shard::Create(o);
  EXPECT_TRUE(shard.ok()) << shard.status();
  return *std::move(shard);
}

void ExpectSameState(const ShardState& a, const ShardState& b) {
  EXPECT_EQ(a.shard_id, b.shard_id);
  EXPECT_EQ(a.num_shards, b.num_shards);
  EXPECT_EQ(a.num_workers, b.num_workers);
  EXPECT_EQ(a.workers_seen, b.workers_seen);
  EXPECT_TRUE(CompareModelSpecs(a.spec, b.spec).ok());
  EXPECT_EQ(a.version, b.version);
  EXPECT_EQ(a.weights, b.weights);
  EXPECT_EQ(a.optimizer, b.optimizer);
  EXPECT_EQ(a.optimizer_state, b.optimizer_state);
  EXPECT_EQ(a.incarnation, b.incarnation);
  EXPECT_EQ(a.last_seq, b.last_seq);
}

TEST(Checkpoint, StateRoundTripsThroughBytes) {
  const ShardState s = TestShardState();
  ASSERT_FALSE(s.weights.empty());
  auto decoded = DecodeShardState(EncodeShardState(s), SpecLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSameState(s, *decoded);
}

TEST(Checkpoint, RestoredShardHoldsTheWholeState) {
  const ShardState s = TestShardState();
  auto shard = ShardFor(s);
  ASSERT_TRUE(RestoreCheckpoint(EncodeShardState(s), shard.get()).ok());
  const ShardStats stats = shard->Stats();
  EXPECT_TRUE(stats.initialized);
  EXPECT_EQ(stats.version, 7);
  EXPECT_THAT(stats.workers_seen, ElementsAre(0, 2));
  // The same run, started once more.
  ShardState next = s;
  next.incarnation.start = 4;
  EXPECT_EQ(shard->incarnation(), next.incarnation);
  auto exported = shard->ExportState();
  ASSERT_TRUE(exported.ok()) << exported.status();
  ExpectSameState(next, *exported);
  auto bytes = EncodeCheckpoint(*shard);
  ASSERT_TRUE(bytes.ok());
  EXPECT_EQ(*bytes, EncodeShardState(next));
}

TEST(Checkpoint, RollBackOnlyWhileUntouchedSinceTheRestore) {
  const ShardState newer = TestShardState();  // version 7
  ShardState older = TestShardState();
  older.version = 5;
  older.weights.assign(older.weights.size(), 1.0f);
  auto fresh = ShardFor(newer);
  // Not restored from a checkpoint: nothing to roll back from.
  EXPECT_EQ(fresh->RollBackToCheckpoint(older).code(), absl::StatusCode::kFailedPrecondition);
  ASSERT_TRUE(fresh->LoadCheckpoint(newer).ok());
  const Incarnation restarted = fresh->incarnation();
  ASSERT_TRUE(fresh->RollBackToCheckpoint(older).ok());
  EXPECT_EQ(fresh->Stats().version, 5);
  EXPECT_EQ(fresh->incarnation(), restarted);  // a rollback is no restart
  // Once it changes (here: a restore from a worker's copy), it stays.
  ASSERT_TRUE(fresh->LoadCheckpoint(newer).ok());
  std::vector<RawTensorSlice> values;
  const auto layout = MakeSliceLayout(kTestSpec, 2, 1);
  for (const SliceRange& r : layout->slices) {
    values.push_back(RawTensorSlice{
        kTestSpec[r.tensor_index].name, kTestSpec[r.tensor_index].shape, r.offset, r.length,
        {absl::string_view(reinterpret_cast<const char*>(newer.weights.data() + r.flat_offset),
                           r.length * sizeof(float))}});
  }
  ASSERT_TRUE(*fresh->AdoptWorkerCopy(0, kTestSpec, values, 9));
  absl::Status refused = fresh->RollBackToCheckpoint(older);
  EXPECT_EQ(refused.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("cannot roll back"));
  EXPECT_EQ(fresh->Stats().version, 9);
}

TEST(Checkpoint, AsyncPushSeqsRoundTripAndStillDeduplicate) {
  ShardState s = TestShardState();
  s.last_seq = {4, 0, 9};
  auto decoded = DecodeShardState(EncodeShardState(s), SpecLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ExpectSameState(s, *decoded);
  ShardOptions o;
  o.shard_id = s.shard_id;
  o.num_shards = s.num_shards;
  o.num_workers = s.num_workers;
  o.mode = Mode::kAsync;
  auto shard = *Shard::Create(o);
  ASSERT_TRUE(shard->LoadCheckpoint(*decoded).ok());
  EXPECT_EQ(shard->LastSeq(2), 9);
  EXPECT_EQ(shard->LastSeq(1), 0);
  s.last_seq = {1, 2, 3, 4};  // more than the workers
  EXPECT_EQ(DecodeShardState(EncodeShardState(s), SpecLimits()).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Checkpoint, StateOfAnotherRunIsRefusedAndChangesNothing) {
  struct Case {
    const char* what;
    void (*mutate)(ShardState*);
    const char* message;
  };
  const Case cases[] = {
      {"other shard", [](ShardState* s) { s->shard_id = 0; }, "state is of shard 0 of 2"},
      {"other count", [](ShardState* s) { s->num_shards = 3; }, "state is of shard 1 of 3"},
      {"other workers", [](ShardState* s) { s->num_workers = 4; }, "4 workers"},
      {"worker out of range", [](ShardState* s) { s->workers_seen = {0, 3}; }, "worker_id 3"},
      {"other optimizer", [](ShardState* s) { s->optimizer = "adam"; }, "\"adam\""},
      {"foreign optimizer state", [](ShardState* s) { s->optimizer_state = "x"; }, ""},
      {"short weights", [](ShardState* s) { s->weights.pop_back(); }, "elements"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    ShardState bad = TestShardState();
    auto shard = ShardFor(bad);  // the shard matches the good state
    c.mutate(&bad);
    absl::Status st = shard->LoadCheckpoint(bad);
    EXPECT_EQ(st.code(), absl::StatusCode::kInvalidArgument) << st;
    EXPECT_THAT(std::string(st.message()), HasSubstr(c.message));
    EXPECT_FALSE(shard->Stats().initialized);
    EXPECT_EQ(shard->ExportState().status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(Checkpoint, BadBytesAreInvalidArgument) {
  auto message = [](absl::string_view bytes, const SpecLimits& limits = SpecLimits()) {
    absl::StatusOr<ShardState> st = DecodeShardState(bytes, limits);
    EXPECT_EQ(st.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(st.status().message());
  };
  EXPECT_THAT(message("garbage"), HasSubstr("does not parse"));

  const std::string good = EncodeShardState(TestShardState());
  v1::ShardSnapshot snap;
  ASSERT_TRUE(snap.ParseFromString(good));
  v1::ShardSnapshot bad = snap;
  bad.set_shard_id(2);
  EXPECT_THAT(message(bad.SerializeAsString()), HasSubstr("shard 2 of 2"));
  bad = snap;
  bad.set_num_workers(0);
  EXPECT_THAT(message(bad.SerializeAsString()), HasSubstr("num_workers 0"));
  bad = snap;
  bad.mutable_weights()->RemoveLast();
  EXPECT_THAT(message(bad.SerializeAsString()), HasSubstr("checkpoint"));
  SpecLimits tight;
  tight.max_model_elements = 4;
  EXPECT_EQ(DecodeShardState(good, tight).status().code(), absl::StatusCode::kResourceExhausted);
}

// A shard's checkpoint bytes restore into a fresh shard of the same position
// only.
TEST(Checkpoint, BytesRoundTripIntoAFreshShardOfTheSamePosition) {
  ShardOptions o;
  o.shard_id = 1;
  o.num_shards = 2;
  auto a = Shard::Create(o);
  ASSERT_TRUE(a.ok());
  const TensorList init = {{1, 2, 3, 4}, {5, 6, 7}};
  shard_testing::Slices s = shard_testing::Encode(shard_testing::kSpec, 2, 1, init);
  ASSERT_TRUE(shard_testing::InitSync(a->get(), 0, shard_testing::kSpec, s.data).ok());
  ASSERT_TRUE(shard_testing::PushSlices(a->get(), 0, 0, s.data).ok());
  auto bytes = EncodeCheckpoint(**a);
  ASSERT_TRUE(bytes.ok()) << bytes.status();

  auto b = Shard::Create(o);
  ASSERT_TRUE(b.ok());
  ASSERT_TRUE(RestoreCheckpoint(*bytes, b->get()).ok());
  auto sa = (*a)->ExportState(), sb = (*b)->ExportState();
  EXPECT_EQ(sb->version, 1);
  EXPECT_EQ(sb->weights, sa->weights);

  o.shard_id = 0;
  auto other = Shard::Create(o);
  EXPECT_EQ(RestoreCheckpoint(*bytes, other->get()).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(RestoreCheckpoint("garbage", b->get()).code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
