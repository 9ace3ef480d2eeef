#include "server/checkpoint/reshard.h"

#include <cstdint>
#include <map>
#include <vector>

#include "common/embedding_shard.h"
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

}  // namespace
}  // namespace ps
