#include "server/checkpoint/reshard.h"

#include <cstdint>
#include <map>
#include <vector>

#include "common/embedding_shard.h"
#include "common/optimizer.h"
#include "common/partition.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// The states of a checkpoint of `shards` shards: table "t" (dim 2,
// adagrad: 2 state floats a row) holding ids 0..199 where ShardOfId puts
// them, values (id, -id), state (10 id, 20 id).
std::vector<ShardState> Checkpoint(int shards) {
  std::vector<ShardState> states(shards);
  for (int s = 0; s < shards; ++s) {
    states[s].shard_id = s;
    states[s].num_shards = shards;
    EmbeddingTableState t;
    t.options.name = "t";
    t.options.dim = 2;
    t.options.seed = 4;
    t.options.optimizer.kind = SparseOptimizerKind::kAdagrad;
    t.contents.dim = 2;
    t.contents.optimizer = SparseOptimizerKind::kAdagrad;
    states[s].tables.push_back(t);
  }
  for (uint64_t id = 0; id < 200; ++id) {
    EmbeddingTableContents& c = states[ShardOfId(id, shards)].tables[0].contents;
    const float f = static_cast<float>(id);
    c.ids.push_back(id);
    c.values.insert(c.values.end(), {f, -f});
    c.state.insert(c.state.end(), {10 * f, 20 * f});
  }
  return states;
}

TEST(TablesForShard, EveryRowGoesToItsNewShardWithItsState) {
  const std::vector<ShardState> from = Checkpoint(2);
  std::map<uint64_t, int> where;
  for (int s = 0; s < 3; ++s) {
    absl::StatusOr<std::vector<EmbeddingTableState>> tables = TablesForShard(from, s, 3);
    ASSERT_TRUE(tables.ok()) << tables.status();
    ASSERT_EQ(tables->size(), 1u);
    const EmbeddingTableContents& c = (*tables)[0].contents;
    EXPECT_EQ((*tables)[0].options.name, "t");
    ASSERT_EQ(c.values.size(), 2 * c.ids.size());
    ASSERT_EQ(c.state.size(), 2 * c.ids.size());
    for (size_t i = 0; i < c.ids.size(); ++i) {
      const float f = static_cast<float>(c.ids[i]);
      EXPECT_EQ(ShardOfId(c.ids[i], 3), s);
      EXPECT_EQ(c.values[2 * i], f);
      EXPECT_EQ(c.values[2 * i + 1], -f);
      EXPECT_EQ(c.state[2 * i], 10 * f);
      EXPECT_EQ(c.state[2 * i + 1], 20 * f);
      where[c.ids[i]] = s;
    }
  }
  EXPECT_EQ(where.size(), 200u);  // each id on exactly one new shard
}

TEST(TablesForShard, RefusesStatesThatAreNotOneWholeCheckpoint) {
  std::vector<ShardState> from = Checkpoint(3);
  std::vector<ShardState> missing(from.begin(), from.begin() + 2);
  EXPECT_THAT(TablesForShard(missing, 0, 2).status().message(), HasSubstr("3 shards"));
  std::vector<ShardState> twice = from;
  twice[2].shard_id = 1;
  EXPECT_THAT(TablesForShard(twice, 0, 2).status().message(), HasSubstr("one of each"));
  std::vector<ShardState> other = from;
  other[1].tables[0].options.dim = 3;
  EXPECT_THAT(TablesForShard(other, 0, 2).status().message(), HasSubstr("differs"));
  std::vector<ShardState> dup = from;
  dup[0].tables[0].contents.ids[0] = from[1].tables[0].contents.ids[0];
  EXPECT_THAT(TablesForShard(dup, 0, 2).status().message(), HasSubstr("two shards"));
  EXPECT_THAT(TablesForShard(from, 2, 2).status().message(), HasSubstr("no position"));
  EXPECT_THAT(LoadTablesForShard("/nonexistent/ckpt", 2, 0, 3, SpecLimits()).status().message(),
              HasSubstr("/nonexistent/ckpt"));
}

// The dense state of a checkpoint of `shards` shards: tensors "w" [5, 3]
// and "b" [7] whose element e of tensor t is 100 t + e, adam's buffers
// that value + 0.5 and + 0.25, started at version 3; version 9, worker 1
// seen by the last shard only, async push seqs {4, 6}.
std::vector<ShardState> DenseCheckpoint(int shards) {
  const ModelSpec spec = {{"w", {5, 3}}, {"b", {7}}};
  std::vector<ShardState> states = Checkpoint(shards);
  for (int s = 0; s < shards; ++s) {
    ShardState& st = states[s];
    st.num_workers = 2;
    st.spec = spec;
    st.version = 9;
    st.optimizer = "adam";
    st.incarnation.run_id = 77;
    st.incarnation.start = 1 + s;
    st.last_seq = {4, 6};
    if (s == shards - 1) st.workers_seen = {1};
    OptimizerStateParts parts;
    parts.name = "adam";
    parts.start = 3;
    parts.buffers.resize(2);
    for (const SliceRange& r : ShardSlices(spec, shards, s)) {
      for (int64_t e = r.offset; e < r.offset + r.length; ++e) {
        const float v = static_cast<float>(100 * r.tensor_index + e);
        st.weights.push_back(v);
        parts.buffers[0].push_back(v + 0.5f);
        parts.buffers[1].push_back(v + 0.25f);
      }
    }
    parts.elements = static_cast<int64_t>(st.weights.size());
    st.optimizer_state = JoinOptimizerState(parts);
  }
  return states;
}

TEST(StateForShard, CutsTheDenseStateAgainAndRoundTripsBitForBit) {
  const std::vector<ShardState> two = DenseCheckpoint(2);
  std::vector<ShardState> three;
  for (int s = 0; s < 3; ++s) {
    absl::StatusOr<ShardState> st = StateForShard(two, s, 3);
    ASSERT_TRUE(st.ok()) << st.status();
    EXPECT_EQ(st->shard_id, s);
    EXPECT_EQ(st->num_shards, 3);
    EXPECT_EQ(st->version, 9);
    EXPECT_EQ(st->last_seq, (std::vector<int64_t>{4, 6}));
    EXPECT_EQ(st->workers_seen, std::vector<int>{1});
    EXPECT_EQ(st->incarnation.start, 2);  // the newest of the run
    absl::StatusOr<OptimizerStateParts> parts = SplitOptimizerState(st->optimizer_state);
    ASSERT_TRUE(parts.ok()) << parts.status();
    EXPECT_EQ(parts->start, 3);
    size_t i = 0;
    for (const SliceRange& r : ShardSlices(st->spec, 3, s)) {
      for (int64_t e = r.offset; e < r.offset + r.length; ++e, ++i) {
        const float v = static_cast<float>(100 * r.tensor_index + e);
        ASSERT_EQ(st->weights[i], v);
        ASSERT_EQ(parts->buffers[0][i], v + 0.5f);
        ASSERT_EQ(parts->buffers[1][i], v + 0.25f);
      }
    }
    EXPECT_EQ(i, st->weights.size());
    three.push_back(*std::move(st));
  }
  // Back onto 2: the same weights and optimizer bytes.
  for (int s = 0; s < 2; ++s) {
    absl::StatusOr<ShardState> back = StateForShard(three, s, 2);
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(back->weights, two[s].weights);
    EXPECT_EQ(back->optimizer_state, two[s].optimizer_state);
  }
}

TEST(StateForShard, RefusesShardsThatDisagree) {
  std::vector<ShardState> states = DenseCheckpoint(2);
  states[1].version = 8;
  EXPECT_THAT(StateForShard(states, 0, 3).status().message(),
              HasSubstr("shard 1 of 2 is at version 8, shard 0 at 9"));
  states = DenseCheckpoint(2);
  states[1].last_seq = {4, 5};
  EXPECT_THAT(StateForShard(states, 0, 3).status().message(), HasSubstr("last push seqs"));
  states = DenseCheckpoint(2);
  states[0].weights.pop_back();
  EXPECT_THAT(StateForShard(states, 0, 3).status().message(), HasSubstr("weights where"));
  states = DenseCheckpoint(2);
  states[1].optimizer_state.pop_back();
  EXPECT_EQ(StateForShard(states, 0, 3).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
