#include "server/core/shard_options.h"

#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// The message of `o.Validate()`, which must be INVALID_ARGUMENT.
std::string Refusal(const ShardOptions& o) {
  const absl::Status s = o.Validate();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(ShardOptions, DefaultsAreValid) { EXPECT_TRUE(ShardOptions().Validate().ok()); }

TEST(ShardOptions, ValidateNamesWhatIsOutOfRange) {
  ShardOptions o;
  o.num_shards = 0;
  EXPECT_THAT(Refusal(o), HasSubstr("num_shards must be >= 1, got 0"));
  o = ShardOptions();
  o.num_shards = 2;
  o.shard_id = 2;
  EXPECT_THAT(Refusal(o), HasSubstr("shard_id must be in [0, 2), got 2"));
  o = ShardOptions();
  o.num_workers = 0;
  EXPECT_THAT(Refusal(o), HasSubstr("num_workers must be >= 1, got 0"));
  o = ShardOptions();
  o.max_wait = absl::Seconds(1);
  EXPECT_THAT(Refusal(o), HasSubstr("need 0 < default_wait <= max_wait"));
  o = ShardOptions();
  o.max_pending_pushes = -1;
  EXPECT_THAT(Refusal(o), HasSubstr("--max_pending_pushes must be >= 0, got -1"));
  o = ShardOptions();
  o.max_waiting_calls = 0;
  EXPECT_THAT(Refusal(o), HasSubstr("--max_waiting_calls must be >= 1, got 0"));
  o = ShardOptions();
  o.optimizer.name = "rmsprop";
  EXPECT_THAT(Refusal(o), HasSubstr("unknown --optimizer 'rmsprop'"));
  o = ShardOptions();
  o.optimizer.name = "adam";
  o.optimizer.beta1 = 1;
  EXPECT_THAT(Refusal(o), HasSubstr("--beta1 must be in [0, 1)"));
  o = ShardOptions();
  o.mode = static_cast<Mode>(42);
  EXPECT_THAT(Refusal(o), HasSubstr("42"));
  o = ShardOptions();
  o.num_workers = 2;
  o.sync_rule.quorum = 3;
  EXPECT_FALSE(o.Validate().ok());
  o = ShardOptions();
  o.worker_timeout = absl::Seconds(-1);
  EXPECT_THAT(Refusal(o), HasSubstr("--worker_timeout must be >= 0, got -1s"));
  o = ShardOptions();
  o.checkpoint_full_every = 0;
  EXPECT_THAT(Refusal(o), HasSubstr("--checkpoint_full_every must be >= 1, got 0"));
  o.checkpoint_full_every = 3;  // deltas need the tables' changes kept
  EXPECT_THAT(Refusal(o), HasSubstr("track_changes"));
  o.tables.track_changes = true;
  EXPECT_TRUE(o.Validate().ok());
}

TEST(ShardOptions, CheckWorkerNamesTheRange) {
  ShardOptions o;
  o.num_workers = 3;
  EXPECT_TRUE(o.CheckWorker(2).ok());
  const absl::Status s = o.CheckWorker(3);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("this server has 3 workers (ids 0..2)"));
  EXPECT_FALSE(o.CheckWorker(-1).ok());
}

TEST(ShardOptions, CheckStateRefusesAnotherPositionWorkerCountOrOptimizer) {
  ShardOptions o;
  o.shard_id = 1;
  o.num_shards = 2;
  o.num_workers = 2;
  ShardState state;
  state.shard_id = 1;
  state.num_shards = 2;
  state.num_workers = 2;
  state.workers_seen = {0, 1};
  state.spec = {{"w", {4}}};
  state.optimizer = "sgd";
  EXPECT_TRUE(o.CheckState(state).ok());
  ShardState other = state;
  other.shard_id = 0;
  EXPECT_THAT(std::string(o.CheckState(other).message()),
              HasSubstr("state is of shard 0 of 2, this is shard 1 of 2"));
  other = state;
  other.num_workers = 3;
  EXPECT_THAT(std::string(o.CheckState(other).message()),
              HasSubstr("a run with 3 workers, this server expects 2"));
  other = state;
  other.workers_seen = {5};
  EXPECT_THAT(std::string(o.CheckState(other).message()), HasSubstr("worker_id 5"));
  other = state;
  other.optimizer = "adam";
  EXPECT_THAT(std::string(o.CheckState(other).message()), HasSubstr("optimizer \"adam\""));
  other = state;
  other.spec = {{"w", {-1}}};
  EXPECT_EQ(o.CheckState(other).code(), absl::StatusCode::kInvalidArgument);
  // Embedding tables kept with another sparse optimizer than the server's.
  other = state;
  other.tables.emplace_back();
  other.tables[0].options.name = "user";
  other.tables[0].options.optimizer.kind = o.tables.optimizer.kind;
  EXPECT_TRUE(o.CheckState(other).ok());
  other.tables[0].options.optimizer.kind = SparseOptimizerKind::kFtrl;
  EXPECT_THAT(std::string(o.CheckState(other).message()),
              HasSubstr("embedding table \"user\" with ftrl state, this server runs adagrad"));
}

}  // namespace
}  // namespace ps
