// Embedding tables in the checkpoint format (server/checkpoint/checkpoint.h): a table
// of each sparse optimizer survives Export -> EncodeShardState ->
// DecodeShardState -> Import bit for bit, old checkpoints decode with no
// tables, and malformed table snapshots are errors naming the table.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/embedding_shard.h"
#include "common/sparse_optimizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "proto/checkpoint.pb.h"
#include "server/checkpoint/checkpoint.h"
#include "server/core/test_shard_state.h"
#include "server/core/embedding_table.h"
#include "server/core/shard.h"
#include "server/core/shard_state.h"

namespace ps {
namespace {

using ::testing::AllOf;
using ::testing::HasSubstr;

constexpr SparseOptimizerKind kAllKinds[] = {SparseOptimizerKind::kSgd,
                                             SparseOptimizerKind::kAdagrad,
                                             SparseOptimizerKind::kAdam, SparseOptimizerKind::kFtrl};
constexpr int kDim = 4;

// Every option away from its default, so a field lost on the way shows.
EmbeddingTableOptions Options(SparseOptimizerKind kind) {
  EmbeddingTableOptions o;
  o.name = std::string("t_") + std::string(SparseOptimizerName(kind));
  o.dim = kDim;
  o.seed = 0xfeedface12345678u;
  o.init_scale = 0.5f;
  o.max_rows = 20;
  o.evict_lru = true;
  o.optimizer.kind = kind;
  o.optimizer.lr = 0.1f;
  o.optimizer.adagrad_initial_accumulator = 0.25f;
  o.optimizer.adam_beta1 = 0.8f;
  o.optimizer.adam_beta2 = 0.99f;
  o.optimizer.adam_eps = 1e-6f;
  o.optimizer.ftrl_l1 = 0.01f;
  o.optimizer.ftrl_l2 = 0.001f;
  o.optimizer.ftrl_beta = 0.5f;
  return o;
}

std::unique_ptr<EmbeddingTable> Make(const EmbeddingTableOptions& o) {
  absl::StatusOr<std::unique_ptr<EmbeddingTable>> t = EmbeddingTable::Create(o);
  EXPECT_TRUE(t.ok()) << t.status();
  return t.ok() ? std::move(*t) : nullptr;
}

std::vector<uint32_t> Bits(const std::vector<float>& v) {
  std::vector<uint32_t> b(v.size());
  if (!v.empty()) std::memcpy(b.data(), v.data(), v.size() * sizeof(float));
  return b;
}

std::vector<float> PullAll(EmbeddingTable* t, const std::vector<uint64_t>& ids) {
  std::vector<float> out(ids.size() * t->options().dim);
  absl::Status s = t->Pull(ids, out.data());
  EXPECT_TRUE(s.ok()) << s;
  return out;
}

// One step: up to 5 distinct ids of [0, 30) (so rows are evicted past 20),
// gradients that differ by step, row and element, of both signs.
void Train(EmbeddingTable* t, int step) {
  std::vector<uint64_t> ids;
  std::vector<float> g;
  for (int k = 0; k < 5; ++k) {
    const uint64_t id = Mix64(step * 5 + k) % 30;
    if (std::find(ids.begin(), ids.end(), id) != ids.end()) continue;
    ids.push_back(id);
    for (int j = 0; j < kDim; ++j) {
      const uint64_t h = Mix64(static_cast<uint64_t>(step) * 1000003 + id * 31 + j);
      g.push_back(static_cast<float>(static_cast<int64_t>(h % 2001) - 1000) / 500.0f);
    }
  }
  ASSERT_TRUE(t->Apply(ids, g.data()).ok());
}

// The dense state plus one trained table of each optimizer (`tables`).
ShardState StateWithTables(std::vector<std::unique_ptr<EmbeddingTable>>* tables) {
  ShardState s = TestShardState();
  for (SparseOptimizerKind kind : kAllKinds) {
    tables->push_back(Make(Options(kind)));
    for (int step = 0; step < 30; ++step) Train(tables->back().get(), step);
    s.tables.push_back({tables->back()->options(), *tables->back()->Export()});
  }
  return s;
}

TEST(EmbeddingCheckpoint, EachOptimizerRestoresBitForBitAndTrainsOn) {
  std::vector<std::unique_ptr<EmbeddingTable>> originals;
  const ShardState s = StateWithTables(&originals);
  absl::StatusOr<ShardState> decoded = DecodeShardState(EncodeShardState(s), SpecLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ(decoded->weights, s.weights);
  ASSERT_EQ(decoded->tables.size(), originals.size());
  for (size_t i = 0; i < originals.size(); ++i) {
    EmbeddingTable* a = originals[i].get();
    const EmbeddingTableState& t = decoded->tables[i];
    SCOPED_TRACE(t.options.name);
    const EmbeddingTableOptions& o = t.options;
    const EmbeddingTableOptions& want = a->options();
    EXPECT_EQ(o.name, want.name);
    EXPECT_EQ(o.dim, want.dim);
    EXPECT_EQ(o.seed, want.seed);
    EXPECT_EQ(o.init_scale, want.init_scale);
    EXPECT_EQ(o.max_rows, want.max_rows);
    EXPECT_EQ(o.evict_lru, want.evict_lru);
    EXPECT_EQ(o.optimizer.kind, want.optimizer.kind);
    EXPECT_EQ(o.optimizer.lr, want.optimizer.lr);
    EXPECT_EQ(o.optimizer.adagrad_initial_accumulator,
              want.optimizer.adagrad_initial_accumulator);
    EXPECT_EQ(o.optimizer.adam_beta1, want.optimizer.adam_beta1);
    EXPECT_EQ(o.optimizer.adam_beta2, want.optimizer.adam_beta2);
    EXPECT_EQ(o.optimizer.adam_eps, want.optimizer.adam_eps);
    EXPECT_EQ(o.optimizer.ftrl_l1, want.optimizer.ftrl_l1);
    EXPECT_EQ(o.optimizer.ftrl_l2, want.optimizer.ftrl_l2);
    EXPECT_EQ(o.optimizer.ftrl_beta, want.optimizer.ftrl_beta);

    auto b = Make(o);
    ASSERT_NE(b, nullptr);
    ASSERT_TRUE(b->Import(t.contents).ok());
    const EmbeddingTableContents saved = *a->Export();
    ASSERT_EQ(saved.ids.size(), 20u);
    EXPECT_EQ(t.contents.ids, saved.ids);  // the LRU order too
    EXPECT_EQ(t.contents.adam_steps.size(),
              o.optimizer.kind == SparseOptimizerKind::kAdam ? 20u : 0u);
    EXPECT_EQ(Bits(PullAll(b.get(), saved.ids)), Bits(PullAll(a, saved.ids)));
    for (int step = 30; step < 60; ++step) {
      Train(a, step);
      Train(b.get(), step);
    }
    const EmbeddingTableContents ea = *a->Export(), eb = *b->Export();
    EXPECT_EQ(ea.ids, eb.ids);
    EXPECT_EQ(Bits(ea.values), Bits(eb.values));
    EXPECT_EQ(Bits(ea.state), Bits(eb.state));
    EXPECT_EQ(ea.adam_steps, eb.adam_steps);
  }
}

TEST(EmbeddingCheckpoint, EmptyTableRoundTrips) {
  ShardState s = TestShardState();
  auto t = Make(Options(SparseOptimizerKind::kAdam));
  s.tables.push_back({t->options(), *t->Export()});
  absl::StatusOr<ShardState> decoded = DecodeShardState(EncodeShardState(s), SpecLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->tables.size(), 1u);
  EXPECT_TRUE(decoded->tables[0].contents.ids.empty());
  EXPECT_TRUE(Make(decoded->tables[0].options)->Import(decoded->tables[0].contents).ok());
}

TEST(EmbeddingCheckpoint, CheckpointWithoutTablesDecodesWithNone) {
  // A snapshot as written before tables existed: no field 12 at all.
  const std::string bytes = EncodeShardState(TestShardState());
  v1::ShardSnapshot snap;
  ASSERT_TRUE(snap.ParseFromString(bytes));
  EXPECT_EQ(snap.tables_size(), 0);
  absl::StatusOr<ShardState> decoded = DecodeShardState(bytes, SpecLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(decoded->tables.empty());
  EXPECT_EQ(decoded->weights, TestShardState().weights);
}

// Encoded dense state plus one trained adam table "t_adam" (3 rows), as a
// proto to break.
v1::ShardSnapshot GoodSnapshot() {
  ShardState s = TestShardState();
  auto t = Make(Options(SparseOptimizerKind::kAdam));
  PullAll(t.get(), {5, 6, 7});
  s.tables.push_back({t->options(), *t->Export()});
  v1::ShardSnapshot snap;
  EXPECT_TRUE(snap.ParseFromString(EncodeShardState(s)));
  return snap;
}

absl::Status Decode(const v1::ShardSnapshot& snap, const SpecLimits& limits = SpecLimits()) {
  return DecodeShardState(snap.SerializeAsString(), limits).status();
}

TEST(EmbeddingCheckpoint, MalformedTablesAreInvalidArgumentNamingTheTable) {
  ASSERT_TRUE(Decode(GoodSnapshot()).ok());
  struct Case {
    const char* what;
    std::function<void(v1::EmbeddingTableSnapshot*)> breaks;
    const char* says;
  };
  const Case cases[] = {
      {"dim 0", [](v1::EmbeddingTableSnapshot* t) { t->set_dim(0); }, "dim"},
      {"dim past the limit", [](v1::EmbeddingTableSnapshot* t) { t->set_dim(65537); }, "65536"},
      {"unknown optimizer",
       [](v1::EmbeddingTableSnapshot* t) { t->mutable_optimizer()->set_kind("rmsprop"); },
       "rmsprop"},
      {"bad hyperparameter",
       [](v1::EmbeddingTableSnapshot* t) { t->mutable_optimizer()->set_adam_beta1(1.0f); },
       "beta1"},
      {"negative max_rows", [](v1::EmbeddingTableSnapshot* t) { t->set_max_rows(-1); }, "max_rows"},
      {"rows past max_rows", [](v1::EmbeddingTableSnapshot* t) { t->set_max_rows(2); },
       "max_rows 2"},
      {"negative num_rows", [](v1::EmbeddingTableSnapshot* t) { t->set_num_rows(-3); }, "num_rows"},
      {"overflowing sizes",
       [](v1::EmbeddingTableSnapshot* t) {
         t->set_max_rows(0);
         t->set_dim(65536);
         t->set_num_rows(int64_t{1} << 50);
       },
       "overflow"},
      {"more rows than ids", [](v1::EmbeddingTableSnapshot* t) { t->set_num_rows(4); }, "ids"},
      {"an id missing", [](v1::EmbeddingTableSnapshot* t) { t->mutable_ids()->RemoveLast(); },
       "ids"},
      {"values short", [](v1::EmbeddingTableSnapshot* t) { t->mutable_values()->pop_back(); },
       "values"},
      {"state long", [](v1::EmbeddingTableSnapshot* t) { t->mutable_state()->append("abcd"); },
       "state"},
      {"adam steps missing",
       [](v1::EmbeddingTableSnapshot* t) { t->mutable_adam_steps()->RemoveLast(); }, "adam"},
      {"adam steps for sgd",
       [](v1::EmbeddingTableSnapshot* t) {
         t->mutable_optimizer()->set_kind("sgd");
         t->clear_state();
       },
       "adam"},
      {"a repeated id", [](v1::EmbeddingTableSnapshot* t) { t->set_ids(2, t->ids(0)); }, "repeats"},
      {"stamps of another count", [](v1::EmbeddingTableSnapshot* t) { t->add_stamps(1); },
       "stamps"},
      {"a removed id among the rows",
       [](v1::EmbeddingTableSnapshot* t) {
         t->set_tier_snapshot("x");
         t->add_removed_ids(t->ids(1));
       },
       "repeats"},
      {"removed ids in a full checkpoint without a snapshot",
       [](v1::EmbeddingTableSnapshot* t) { t->add_removed_ids(99); }, "removed ids"},
      {"an absolute tier snapshot",
       [](v1::EmbeddingTableSnapshot* t) { t->set_tier_snapshot("/etc"); }, "tier snapshot"},
      {"a tier snapshot out of the directory",
       [](v1::EmbeddingTableSnapshot* t) { t->set_tier_snapshot("a/../../b"); }, "tier snapshot"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.what);
    v1::ShardSnapshot snap = GoodSnapshot();
    c.breaks(snap.mutable_tables(0));
    absl::Status s = Decode(snap);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
    EXPECT_THAT(s.message(), AllOf(HasSubstr("\"t_adam\""), HasSubstr(c.says)));
  }
}

TEST(EmbeddingCheckpoint, ADeltaNamesABaseAtOrBelowItsVersion) {
  v1::ShardSnapshot snap = GoodSnapshot();
  snap.set_version(10);
  snap.set_delta(true);
  snap.set_delta_base(4);
  snap.mutable_tables(0)->add_removed_ids(99);  // a delta's removals
  absl::StatusOr<ShardState> s = DecodeShardState(snap.SerializeAsString(), SpecLimits());
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->delta_base, 4);
  EXPECT_EQ(s->tables[0].removed, std::vector<uint64_t>{99});
  snap.set_delta_base(11);
  EXPECT_THAT(Decode(snap).message(), HasSubstr("names base version 11"));
  snap.set_delta_base(-1);
  EXPECT_EQ(Decode(snap).code(), absl::StatusCode::kInvalidArgument);
}

TEST(EmbeddingCheckpoint, RepeatedOrMissingTableNamesAreInvalidArgument) {
  v1::ShardSnapshot snap = GoodSnapshot();
  *snap.add_tables() = snap.tables(0);
  absl::Status s = Decode(snap);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), AllOf(HasSubstr("\"t_adam\""), HasSubstr("twice")));

  snap = GoodSnapshot();
  snap.mutable_tables(0)->clear_name();
  s = Decode(snap);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("table 0 has no name"));
}

TEST(EmbeddingCheckpoint, RowsPastMaxModelElementsAreResourceExhausted) {
  v1::ShardSnapshot snap = GoodSnapshot();  // 3 rows of 4 values
  *snap.add_tables() = snap.tables(0);
  snap.mutable_tables(1)->set_name("t_second");
  SpecLimits limits;
  limits.max_model_elements = 24;  // the dense model's 17 fit, so do both tables' 24
  EXPECT_TRUE(Decode(snap, limits).ok());
  limits.max_model_elements = 23;
  absl::Status s = Decode(snap, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted) << s;
  EXPECT_THAT(s.message(), AllOf(HasSubstr("\"t_second\""), HasSubstr("max_model_elements")));
}

// Truncated or corrupted bytes never crash, and whatever decodes imports.
TEST(EmbeddingCheckpoint, DamagedBytesAreErrorsOrImportableStates) {
  std::vector<std::unique_ptr<EmbeddingTable>> originals;
  const std::string bytes = EncodeShardState(StateWithTables(&originals));
  auto check = [](const std::string& damaged) {
    absl::StatusOr<ShardState> d = DecodeShardState(damaged, SpecLimits());
    if (!d.ok()) return;  // an error, not a crash
    for (const EmbeddingTableState& t : d->tables) {
      absl::StatusOr<std::unique_ptr<EmbeddingTable>> table = EmbeddingTable::Create(t.options);
      ASSERT_TRUE(table.ok()) << table.status();
      EXPECT_TRUE((*table)->Import(t.contents).ok()) << t.options.name;
    }
  };
  int decoded = 0;
  for (size_t n = 0; n < bytes.size(); ++n) {
    check(bytes.substr(0, n));
    std::string flipped = bytes;
    flipped[n] = static_cast<char>(flipped[n] ^ 0x5a);
    check(flipped);
    if (DecodeShardState(flipped, SpecLimits()).ok()) ++decoded;
  }
  // Flips inside float data decode: the test reached the Import path.
  EXPECT_GT(decoded, 0);
}

const TableSpec kRowsSpec{"t", 2, 3, 0.25f};

// A shard with a table: trains, checkpoints, and a second shard restored
// from the bytes pulls the same rows and continues bit for bit.
TEST(EmbeddingCheckpoint, AShardWithATableRestoresAndContinuesBitForBit) {
  ShardOptions o;
  o.mode = Mode::kAsync;
  o.tables.optimizer = {SparseOptimizerKind::kAdam, 0.01f};
  o.log = nullptr;
  auto a = Shard::Create(o);
  ASSERT_TRUE(a.ok());
  Shard& first = **a;
  ASSERT_TRUE(first.DeclareTables({kRowsSpec}).ok());
  std::vector<RawTensorSlice> none;
  bool inited = false;
  std::string w(2 * sizeof(float), '\0');
  first.Init(0, {{"w", {2}}}, {RawTensorSlice{"w", {2}, 0, 2, {w}}}, absl::Seconds(1),
             [&](absl::StatusOr<int64_t> v, bool) { inited = v.ok(); });
  ASSERT_TRUE(inited);
  const std::vector<uint64_t> ids = {1, 2, 3};
  const std::vector<float> g = {0.5f, -1, 2, 0.25f, -3, 1};
  for (int i = 1; i <= 3; ++i) ASSERT_TRUE(first.PushRows(0, "t", 0, i, ids, g).ok());
  auto state = first.ExportState();
  ASSERT_TRUE(state.ok()) << state.status();
  const std::string bytes = EncodeShardState(*state);

  auto b = Shard::Create(o);
  ASSERT_TRUE(b.ok());
  Shard& second = **b;
  auto decoded = DecodeShardState(bytes, SpecLimits());
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_TRUE(second.LoadCheckpoint(*decoded).ok());
  EXPECT_EQ(second.Tables(), std::vector<TableSpec>{kRowsSpec});
  EXPECT_EQ(second.LastRowSeq(0), 3);
  for (int step = 0; step < 2; ++step) {
    auto ra = first.PullRows(0, "t", ids);
    auto rb = second.PullRows(0, "t", ids);
    ASSERT_TRUE(ra.ok() && rb.ok());
    EXPECT_EQ(ra->values, rb->values) << "after " << step << " more pushes";
    ASSERT_TRUE(first.PushRows(0, "t", 0, 4 + step, ids, g).ok());
    ASSERT_TRUE(second.PushRows(0, "t", 0, 4 + step, ids, g).ok());
  }
  // A server with another sparse optimizer refuses the state.
  ShardOptions other = o;
  other.tables.optimizer.kind = SparseOptimizerKind::kFtrl;
  auto c = Shard::Create(other);
  ASSERT_TRUE(c.ok());
  absl::Status s = (*c)->LoadCheckpoint(*decoded);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--sparse_optimizer"), std::string::npos) << s;
}

}  // namespace
}  // namespace ps
