#include "server/checkpoint/checkpoint_store.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <numeric>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/partition.h"
#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/checkpoint/checkpointer.h"
#include "server/core/shard_state.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;

const ModelSpec kSpec = {{"w", {4, 3}}, {"b", {5}}};

std::string TempDir() {
  std::string dir = std::string(std::getenv("TEST_TMPDIR") ? std::getenv("TEST_TMPDIR") : "/tmp") +
                    "/ckpt-XXXXXX";
  EXPECT_NE(mkdtemp(dir.data()), nullptr);
  return dir;
}

ShardState StateAt(int64_t version, int shard_id = 0) {
  ShardState s;
  s.shard_id = shard_id;
  s.num_shards = 2;
  s.num_workers = 2;
  s.workers_seen = {0, 1};
  s.spec = kSpec;
  s.version = version;
  s.weights.resize(MakeSliceLayout(kSpec, 2, shard_id)->num_elements);
  std::iota(s.weights.begin(), s.weights.end(), static_cast<float>(version));
  s.optimizer = "sgd";
  return s;
}

struct Store {
  std::vector<std::string> lines;
  std::unique_ptr<CheckpointStore> store;
};

Store Open(const std::string& dir, int shard_id = 0, int keep = 3) {
  Store s;
  CheckpointStoreOptions o;
  o.dir = dir;
  o.shard_id = shard_id;
  o.num_shards = 2;
  o.keep = keep;
  o.log = [lines = &s.lines](absl::string_view l) { lines->emplace_back(l); };
  auto store = CheckpointStore::Open(o);
  EXPECT_TRUE(store.ok()) << store.status();
  s.store = *std::move(store);
  return s;
}

std::string Basename(const std::string& path) { return path.substr(path.rfind('/') + 1); }

TEST(CheckpointStore, WritesAndLoadsTheNewest) {
  const std::string dir = TempDir();
  Store s = Open(dir);
  auto none = s.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(none.ok());
  EXPECT_FALSE(none->has_value());
  for (int64_t v : {100, 300, 200}) ASSERT_TRUE(s.store->Write(StateAt(v)).ok());
  auto loaded = s.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->state.version, 300);
  EXPECT_EQ((*loaded)->state.weights, StateAt(300).weights);
  EXPECT_EQ(Basename((*loaded)->path), "shard-0-of-2-v00000000000000000300.ckpt");
  EXPECT_TRUE(s.lines.empty());
  // No temporary file is left behind.
  std::vector<std::string> listed = s.store->List();
  EXPECT_THAT(listed, SizeIs(3));
}

TEST(CheckpointStore, KeepsTheNewestK) {
  Store s = Open(TempDir(), 0, /*keep=*/2);
  for (int64_t v = 1; v <= 5; ++v) ASSERT_TRUE(s.store->Write(StateAt(v)).ok());
  std::vector<std::string> names;
  for (const std::string& p : s.store->List()) names.push_back(Basename(p));
  EXPECT_THAT(names, ElementsAre("shard-0-of-2-v00000000000000000005.ckpt",
                                 "shard-0-of-2-v00000000000000000004.ckpt"));
}

TEST(CheckpointStore, DamagedNewestFallsBackToThePreviousOne) {
  Store s = Open(TempDir(), 0, /*keep=*/5);
  for (int64_t v : {10, 20, 30, 40}) ASSERT_TRUE(s.store->Write(StateAt(v)).ok());
  const std::vector<std::string> files = s.store->List();  // 40, 30, 20, 10
  {  // 40: a flipped byte in the payload.
    std::fstream f(files[0], std::ios::in | std::ios::out | std::ios::binary);
    f.seekp(-3, std::ios::end);
    f.put('\x7f');
  }
  ASSERT_EQ(truncate(files[1].c_str(), 50), 0);  // 30: truncated
  { std::ofstream(files[2], std::ios::trunc) << "garbage"; }  // 20: not a checkpoint
  auto loaded = s.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->state.version, 10);
  ASSERT_THAT(s.lines, SizeIs(3));
  EXPECT_THAT(s.lines[0], HasSubstr("checksum mismatch"));
  EXPECT_THAT(s.lines[1], HasSubstr("truncated"));
  EXPECT_THAT(s.lines[2], HasSubstr("not a checkpoint"));
}

// StateAt(version) with one table "t" of dim 1 holding `rows` (id: value
// id + version), a delta on `base` removing `removed` when base >= 0.
ShardState WithTable(int64_t version, std::vector<uint64_t> rows, int64_t base = -1,
                     std::vector<uint64_t> removed = {}) {
  ShardState s = StateAt(version);
  s.delta_base = base;
  EmbeddingTableState t;
  t.options.name = "t";
  t.options.dim = 1;
  t.options.optimizer.kind = SparseOptimizerKind::kSgd;
  t.contents.dim = 1;
  t.contents.optimizer = SparseOptimizerKind::kSgd;
  for (uint64_t id : rows) {
    t.contents.ids.push_back(id);
    t.contents.values.push_back(static_cast<float>(id + version));
  }
  t.removed = std::move(removed);
  s.tables.push_back(std::move(t));
  return s;
}

// The table's rows of a loaded state: id -> value.
std::map<uint64_t, float> Rows(const ShardState& s) {
  std::map<uint64_t, float> m;
  const EmbeddingTableContents& c = s.tables.at(0).contents;
  for (size_t i = 0; i < c.ids.size(); ++i) m[c.ids[i]] = c.values[i];
  return m;
}

TEST(CheckpointStore, DeltasApplyOnTheNewestFullOneInOrder) {
  Store s = Open(TempDir(), 0, /*keep=*/5);
  ASSERT_TRUE(s.store->Write(WithTable(10, {1, 2, 3})).ok());
  ASSERT_TRUE(s.store->Write(WithTable(20, {2}, 10, {3})).ok());
  auto last = s.store->Write(WithTable(30, {4}, 20));
  ASSERT_TRUE(last.ok());
  EXPECT_THAT(Basename(*last), "shard-0-of-2-v00000000000000000030.delta.ckpt");
  auto loaded = s.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value()) << loaded.status();
  EXPECT_EQ((*loaded)->state.version, 30);
  EXPECT_EQ((*loaded)->state.delta_base, -1);
  EXPECT_EQ((*loaded)->deltas, 2);
  EXPECT_EQ((*loaded)->path, *last);
  EXPECT_EQ((*loaded)->state.weights, StateAt(30).weights);  // the dense state is the delta's
  EXPECT_EQ(Rows((*loaded)->state), (std::map<uint64_t, float>{{1, 11}, {2, 22}, {4, 34}}));
  // At most version 20: the full one and the first delta.
  loaded = s.store->LoadNewest(SpecLimits(), 20);
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(Rows((*loaded)->state), (std::map<uint64_t, float>{{1, 11}, {2, 22}}));
  // A damaged delta ends the chain: the state before it.
  { std::ofstream(s.store->List()[1], std::ios::trunc) << "garbage"; }  // v20
  loaded = s.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->state.version, 10);
  EXPECT_EQ((*loaded)->deltas, 0);
  ASSERT_THAT(s.lines, SizeIs(1));
  EXPECT_THAT(s.lines[0], HasSubstr("v00000000000000000020.delta.ckpt skipped"));
}

TEST(CheckpointStore, PruningKeepsTheNewestFullOnesAndTheDeltasAfterThem) {
  Store s = Open(TempDir(), 0, /*keep=*/2);
  ASSERT_TRUE(s.store->Write(WithTable(10, {1})).ok());
  ASSERT_TRUE(s.store->Write(WithTable(20, {1}, 10)).ok());
  ASSERT_TRUE(s.store->Write(WithTable(30, {1})).ok());
  ASSERT_TRUE(s.store->Write(WithTable(40, {1}, 30)).ok());
  ASSERT_TRUE(s.store->Write(WithTable(50, {1})).ok());
  ASSERT_TRUE(s.store->Write(WithTable(60, {1}, 50)).ok());
  std::vector<std::string> names;
  for (const std::string& p : s.store->List()) names.push_back(Basename(p));
  EXPECT_THAT(names, ElementsAre("shard-0-of-2-v00000000000000000060.delta.ckpt",
                                 "shard-0-of-2-v00000000000000000050.ckpt",
                                 "shard-0-of-2-v00000000000000000040.delta.ckpt",
                                 "shard-0-of-2-v00000000000000000030.ckpt"));
  // A full checkpoint of a delta's version replaces it.
  ASSERT_TRUE(s.store->Write(WithTable(60, {1})).ok());
  EXPECT_EQ(Basename(s.store->List()[0]), "shard-0-of-2-v00000000000000000060.ckpt");
  EXPECT_THAT(s.store->List(), SizeIs(2));  // 60 and 50: keep 2 full ones
}

TEST(CheckpointStore, OpenRemovesTierSnapshotsWithoutTheirFile) {
  const std::string dir = TempDir();
  Store s = Open(dir);
  ASSERT_TRUE(s.store->Write(StateAt(5)).ok());
  const std::string kept = dir + "/shard-0-of-2-v00000000000000000005.tiers/0";
  const std::string orphan = dir + "/shard-0-of-2-v00000000000000000006.tiers/0";
  const std::string other = dir + "/shard-1-of-2-v00000000000000000006.tiers/0";
  for (const std::string& d : {kept, orphan, other}) std::filesystem::create_directories(d);
  Store again = Open(dir);
  EXPECT_TRUE(std::filesystem::exists(kept));
  EXPECT_FALSE(std::filesystem::exists(orphan));
  EXPECT_TRUE(std::filesystem::exists(other));  // another shard's
  EXPECT_TRUE(std::filesystem::is_directory(again.store->TierStagingDir()));
}

TEST(CheckpointStore, AFailedWriteLeavesNoTierSnapshotBehind) {
  const std::string dir = TempDir();
  Store s = Open(dir);
  ShardState state = WithTable(7, {1});
  state.tables[0].tier_snapshot = s.store->TierStagingDir() + "/snap";
  std::filesystem::create_directories(state.tables[0].tier_snapshot);
  // The file's temporary name is taken by a folder: the write fails after
  // the snapshot moved next to the file.
  std::filesystem::create_directories(dir + "/.tmp-" + s.store->FileName(7));
  EXPECT_FALSE(s.store->Write(state).ok());
  EXPECT_FALSE(std::filesystem::exists(dir + "/shard-0-of-2-v00000000000000000007.tiers"));
  EXPECT_THAT(s.store->List(), IsEmpty());
}

TEST(CheckpointStore, ShardsShareADirectoryWithoutSeeingEachOther) {
  const std::string dir = TempDir();
  Store a = Open(dir, 0), b = Open(dir, 1);
  ASSERT_TRUE(a.store->Write(StateAt(7, 0)).ok());
  ASSERT_TRUE(b.store->Write(StateAt(9, 1)).ok());
  EXPECT_THAT(a.store->List(), SizeIs(1));
  auto loaded = b.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ((*loaded)->state.version, 9);
  EXPECT_EQ((*loaded)->state.shard_id, 1);
  EXPECT_EQ(a.store->Write(StateAt(8, 1)).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CheckpointStore, UnusableDirectoryIsAnError) {
  CheckpointStoreOptions o;
  o.dir = "/proc/no-such-dir/ckpt";
  EXPECT_FALSE(CheckpointStore::Open(o).ok());
  o.dir = TempDir();
  o.keep = 0;
  EXPECT_EQ(CheckpointStore::Open(o).status().code(), absl::StatusCode::kInvalidArgument);
}

// A Checkpointer on a FakeClock over a store that keeps 10, whose shard is
// at `current` (settable), and its log lines. Nothing is written until the
// test advances the clock (or calls WriteNow), and then on the test's
// thread: no sleep, no wait.
class CheckpointerTest : public ::testing::Test {
 protected:
  static constexpr absl::Duration kPeriod = absl::Minutes(10);

  std::unique_ptr<Checkpointer> Make(absl::Duration period = kPeriod) {
    CheckpointerOptions o;
    o.export_state = [this]() -> absl::StatusOr<ShardState> { return StateAt(current_); };
    o.log = [this](absl::string_view line) { log_.emplace_back(line); };
    o.period = period;
    o.clock = &clock_;
    return std::make_unique<Checkpointer>(store_.store.get(), o);
  }

  // The versions of the files written, oldest first (List: newest first,
  // named ...-v<version>.ckpt).
  std::vector<int64_t> Written() const {
    std::vector<int64_t> versions;
    for (const std::string& path : store_.store->List()) {
      versions.insert(versions.begin(),
                      std::strtoll(path.c_str() + path.rfind("-v") + 2, nullptr, 10));
    }
    return versions;
  }

  FakeClock clock_;
  Store store_ = Open(TempDir(), 0, /*keep=*/10);
  int64_t current_ = 5;
  std::vector<std::string> log_;
};

// The checkpointer writes what the shard offers, writes the current state on
// demand (once per version), and writes periodically when the version moved.
TEST_F(CheckpointerTest, WritesOfferedAndCurrentStates) {
  std::unique_ptr<Checkpointer> c = Make();
  c->Offer(StateAt(3));
  EXPECT_THAT(Written(), IsEmpty());  // on the timer, which has not run
  clock_.RunDue();
  EXPECT_THAT(Written(), ElementsAre(3));
  // The periodic export writes v5.
  clock_.Advance(kPeriod);
  EXPECT_THAT(Written(), ElementsAre(3, 5));
  current_ = 6;
  auto now = c->WriteNow();
  ASSERT_TRUE(now.ok());
  EXPECT_TRUE(now->written);
  EXPECT_EQ(now->version, 6);
  EXPECT_THAT(Basename(now->path), HasSubstr("v00000000000000000006"));
  // Same version: nothing new is written; on the timer likewise.
  std::optional<absl::StatusOr<CheckpointWritten>> again;
  c->RequestWrite([&](absl::StatusOr<CheckpointWritten> r) { again = std::move(r); });
  EXPECT_FALSE(again.has_value());
  clock_.RunDue();
  ASSERT_TRUE(again.has_value());
  ASSERT_TRUE(again->ok());
  EXPECT_FALSE((*again)->written);
  EXPECT_EQ((*again)->path, now->path);
  EXPECT_EQ(c->last_written_version(), 6);
  ASSERT_FALSE(log_.empty());
  EXPECT_THAT(log_.back(), HasSubstr("shard 0: checkpoint v6 written to"));
}

// Each period, counted from the last periodic write, writes the shard's
// state if its version moved: only once the fake time passes the period.
TEST_F(CheckpointerTest, APeriodWritesOnlyWhenItsTimeHasPassedAndTheVersionMoved) {
  std::unique_ptr<Checkpointer> c = Make();
  clock_.Advance(kPeriod - absl::Nanoseconds(1));
  EXPECT_THAT(Written(), IsEmpty());
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_THAT(Written(), ElementsAre(5));
  clock_.Advance(kPeriod);  // the version did not move
  EXPECT_THAT(Written(), ElementsAre(5));
  current_ = 8;
  clock_.Advance(kPeriod - absl::Nanoseconds(1));
  EXPECT_THAT(Written(), ElementsAre(5));
  clock_.Advance(absl::Nanoseconds(1));
  EXPECT_THAT(Written(), ElementsAre(5, 8));
  EXPECT_EQ(c->last_written_version(), 8);
}

TEST_F(CheckpointerTest, WithoutAPeriodOnlyOffersAndRequestsWrite) {
  std::unique_ptr<Checkpointer> c = Make(absl::ZeroDuration());
  EXPECT_EQ(clock_.pending(), 0);
  clock_.Advance(absl::Hours(24));
  EXPECT_THAT(Written(), IsEmpty());
  // Two offers before the timer runs: the newer replaces the older.
  c->Offer(StateAt(2));
  c->Offer(StateAt(3));
  clock_.RunDue();
  EXPECT_THAT(Written(), ElementsAre(3));
}

// The destructor writes nothing more: an offer still waiting is dropped,
// and a request still waiting is answered UNAVAILABLE.
TEST_F(CheckpointerTest, WhatWaitsAtDestructionIsNotWrittenAndRequestsAreAnswered) {
  std::optional<absl::StatusOr<CheckpointWritten>> answer;
  {
    std::unique_ptr<Checkpointer> c = Make();
    c->Offer(StateAt(3));
    c->RequestWrite([&](absl::StatusOr<CheckpointWritten> r) { answer = std::move(r); });
  }
  EXPECT_EQ(clock_.pending(), 0);
  EXPECT_THAT(Written(), IsEmpty());
  ASSERT_TRUE(answer.has_value());
  EXPECT_EQ(answer->status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(answer->status().message(), "shard 0 is shutting down");
}

// Incremental checkpoints: deltas offered while the writer is behind fold
// into one, and a delta whose base is not the last written is dropped (the
// shard is told to export a full one next).
TEST_F(CheckpointerTest, DeltasFoldWhileWaitingAndOneOffItsBaseIsDropped) {
  int restarts = 0;
  CheckpointerOptions o;
  o.export_state = [this]() -> absl::StatusOr<ShardState> { return WithTable(current_, {9}); };
  o.restart_chain = [&restarts] { ++restarts; };
  o.log = [this](absl::string_view line) { log_.emplace_back(line); };
  o.clock = &clock_;
  Checkpointer c(store_.store.get(), o);
  c.Offer(WithTable(3, {1, 2}));
  clock_.RunDue();
  c.Offer(WithTable(4, {2}, 3, {1}));
  c.Offer(WithTable(5, {7}, 4));
  clock_.RunDue();
  EXPECT_THAT(Written(), ElementsAre(3, 5));
  EXPECT_THAT(log_.back(), HasSubstr("(8 weights, 2 table rows, delta on v3,"));
  auto loaded = store_.store->LoadNewest(SpecLimits());
  ASSERT_TRUE(loaded.ok() && loaded->has_value());
  EXPECT_EQ(Rows((*loaded)->state), (std::map<uint64_t, float>{{2, 6}, {7, 12}}));
  EXPECT_EQ(restarts, 0);
  c.Offer(WithTable(7, {1}, 6));  // v6 was never written
  clock_.RunDue();
  EXPECT_THAT(Written(), ElementsAre(3, 5));
  EXPECT_EQ(restarts, 1);
  EXPECT_THAT(log_.back(),
              HasSubstr("checkpoint delta v7 on v6 dropped: the newest written is v5"));
  // WriteNow after a dropped delta exports again (a full one, as the shard
  // now plans).
  current_ = 8;
  EXPECT_TRUE(c.WriteNow().ok());
  EXPECT_THAT(Written(), ElementsAre(3, 5, 8));
}

// RealClock's timer: the writer thread, as in production.
TEST(CheckpointerOnRealClock, WritesOnItsOwnThread) {
  Store s = Open(TempDir(), 0, /*keep=*/10);
  CheckpointerOptions o;
  o.export_state = [] { return absl::StatusOr<ShardState>(StateAt(4)); };
  Checkpointer c(s.store.get(), o);
  absl::Notification requested;
  absl::StatusOr<CheckpointWritten> result = absl::UnknownError("not called");
  c.RequestWrite([&](absl::StatusOr<CheckpointWritten> r) {
    result = std::move(r);
    requested.Notify();
  });
  ASSERT_TRUE(requested.WaitForNotificationWithTimeout(absl::Seconds(30)));
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->version, 4);
  EXPECT_TRUE(result->written);
}

}  // namespace
}  // namespace ps
