#include "server/shard.h"

#include "server/checkpoint.h"

#include <utility>

#include <cstdlib>

#include "absl/strings/match.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::SizeIs;
using ::testing::MatchesRegex;

// Encoded slices of `values` for every slice of `layout`.
struct Slices {
  std::vector<std::string> bytes;
  std::vector<RawTensorSlice> data;
};

Slices Encode(const ModelSpec& spec, int num_shards, int shard, const TensorList& values) {
  Slices s;
  const auto layout = ShardSlices(spec, num_shards, shard);
  s.bytes.reserve(layout.size());
  for (const SliceRange& r : layout) {
    const float* p = values[r.tensor_index].data() + r.offset;
    s.bytes.emplace_back(reinterpret_cast<const char*>(p), r.length * sizeof(float));
    s.data.push_back(RawTensorSlice{spec[r.tensor_index].name, spec[r.tensor_index].shape,
                                    r.offset, r.length, {s.bytes.back()}});
  }
  return s;
}

// A unary push: the gradient in one message, assembled, then pushed.
absl::StatusOr<PushResult> PushWithOutcome(Shard* shard, int worker, int64_t version,
                                           const std::vector<RawTensorSlice>& slices) {
  ASSIGN_OR_RETURN(GradientAssembly assembly, shard->StartPush(worker, version));
  RETURN_IF_ERROR(assembly.AddMessage(slices));
  ASSIGN_OR_RETURN(AssembledGradient grad, std::move(assembly).Finish());
  return shard->Push(std::move(grad));
}

// The version after a push the shard applied (or counted into its step).
absl::StatusOr<int64_t> PushSlices(Shard* shard, int worker, int64_t version,
                                   const std::vector<RawTensorSlice>& slices) {
  ASSIGN_OR_RETURN(PushResult r, PushWithOutcome(shard, worker, version, slices));
  if (r.outcome != PushOutcome::kApplied) {
    return absl::InternalError(absl::StrCat("push was ", PushOutcomeName(r.outcome)));
  }
  return r.version;
}

struct PullResult {
  absl::Notification done;
  absl::StatusOr<WeightsSnapshot> snap = absl::UnknownError("not called");
};

void StartPull(Shard* shard, int worker, int64_t min_version, absl::Duration wait,
               PullResult* out) {
  shard->Pull(worker, min_version, wait, [out](absl::StatusOr<WeightsSnapshot> s) {
    out->snap = std::move(s);
    out->done.Notify();
  });
}

absl::StatusOr<int64_t> InitSync(Shard* shard, int worker, const ModelSpec& spec,
                                 const std::vector<RawTensorSlice>& values) {
  absl::Notification n;
  absl::StatusOr<int64_t> result;
  shard->Init(worker, spec, values, absl::Seconds(5), [&](absl::StatusOr<int64_t> v, bool) {
    result = v;
    n.Notify();
  });
  n.WaitForNotificationWithTimeout(absl::Seconds(10));
  return result;
}

const ModelSpec kSpec = {{"w", {2, 2}}, {"b", {3}}};

std::unique_ptr<Shard> MakeShard(Mode mode, int workers, float lr = 0.5f) {
  ShardOptions o;
  o.num_workers = workers;
  o.mode = mode;
  o.optimizer.learning_rate = lr;
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

void InitShard(Shard* shard, const TensorList& init) {
  Slices s = Encode(kSpec, 1, 0, init);
  auto v = InitSync(shard, 0, kSpec, s.data);
  ASSERT_TRUE(v.ok()) << v.status();
}

// Collects a shard's log lines (ShardOptions::log). Must outlive the shard.
class LogCapture {
 public:
  std::function<void(absl::string_view)> Sink() {
    return [this](absl::string_view line) {
      absl::MutexLock l(&mu_);
      lines_.emplace_back(line);
    };
  }

  // Waits up to `timeout` until `n` lines contain `text`; returns those
  // lines (fewer if the time ran out).
  std::vector<std::string> WaitForLines(absl::string_view text, size_t n,
                                        absl::Duration timeout) {
    absl::MutexLock l(&mu_);
    auto enough = [&] { return Matching(text).size() >= n; };
    mu_.AwaitWithTimeout(absl::Condition(&enough), timeout);
    return Matching(text);
  }

  std::vector<std::string> Lines() {
    absl::MutexLock l(&mu_);
    return lines_;
  }

 private:
  std::vector<std::string> Matching(absl::string_view text) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    std::vector<std::string> found;
    for (const std::string& line : lines_) {
      if (absl::StrContains(line, text)) found.push_back(line);
    }
    return found;
  }

  absl::Mutex mu_;
  std::vector<std::string> lines_ ABSL_GUARDED_BY(mu_);
};

std::unique_ptr<Shard> MakeReportingShard(Mode mode, int workers, absl::Duration report_after,
                                          LogCapture* log) {
  ShardOptions o;
  o.num_workers = workers;
  o.mode = mode;
  o.stall_report_after = report_after;
  o.log = log->Sink();
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

TEST(Shard, SyncAveragesAllWorkersThenAppliesOnce) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult pull;
  StartPull(shard.get(), 0, 1, absl::Seconds(10), &pull);
  Slices g1 = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {1, 1, 1}});
  auto v = PushSlices(shard.get(), 1, 0, g1.data);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 0);
  EXPECT_FALSE(pull.done.HasBeenNotified());
  EXPECT_EQ(shard->Stats().waiting_for, std::vector<int>{0});
  Slices g0 = Encode(kSpec, 1, 0, {{0, 4, 0, 4}, {3, 3, 3}});
  v = PushSlices(shard.get(), 0, 0, g0.data);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(*v, 1);
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pull.snap.ok()) << pull.snap.status();
  EXPECT_EQ(pull.snap->version, 1);
  // w - 0.5 * mean(g): mean w grad = {1,3,1,3}, mean b grad = {2,2,2}.
  EXPECT_EQ(*pull.snap->weights, (std::vector<float>{0.5f, 0.5f, 2.5f, 2.5f, -1, -1, -1}));
}

TEST(Shard, SyncPushForWrongStepNamesBothSteps) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  auto v = PushSlices(shard.get(), 0, 3, g.data);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("step 3"));
  EXPECT_THAT(std::string(v.status().message()), HasSubstr("step 0"));
}

TEST(Shard, SyncSecondPushBySameWorkerIsADuplicateAndCounted) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  absl::StatusOr<PushResult> again = PushWithOutcome(shard.get(), 0, 0, g.data);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome, PushOutcome::kDuplicate);
  EXPECT_EQ(again->version, 0);
  EXPECT_EQ(shard->Stats().pushes_duplicate, 1);
  EXPECT_EQ(shard->Stats().pushes_accepted, 1);
}

// Crosses a real timer (the waiters' thread rings the lease check), so it
// takes about 0.3 s; the lease rules themselves are in membership_test.
TEST(Shard, ExpiredLeaseClosesTheStepOnTimeWithoutTheWorkerUntilItIsBack) {
  LogCapture log;
  ShardOptions o;
  o.num_workers = 3;
  o.mode = Mode::kSync;
  o.optimizer.learning_rate = 1.0f;
  o.worker_timeout = absl::Milliseconds(300);
  // Stall reports ring the same timer, which keeps one alarm: at 4.5 ms,
  // 9 ms, ... 288 ms, then 576 ms. A lease check lost under them would drop
  // worker 2 at 576 ms instead of 300 ms.
  o.stall_report_after = absl::Microseconds(4500);
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});  // worker 0 heard from
  ASSERT_TRUE(shard->Register(2, 3).ok());          // worker 2 heard from, then silent
  Slices g0 = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {2, 2, 2}});
  Slices g1 = Encode(kSpec, 1, 0, {{4, 4, 4, 4}, {4, 4, 4}});
  PullResult pull;
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g0.data).ok());
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g1.data).ok());
  StartPull(shard.get(), 0, 1, absl::Seconds(10), &pull);
  // Workers 0 and 1 keep their leases; worker 2 loses its own.
  for (int i = 0; i < 400 && !pull.done.HasBeenNotified(); ++i) {
    absl::SleepFor(absl::Milliseconds(25));
    ASSERT_TRUE(shard->Heartbeat(0).ok());
    ASSERT_TRUE(shard->Heartbeat(1).ok());
  }
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pull.snap.ok()) << pull.snap.status();
  EXPECT_EQ(pull.snap->version, 1);
  // The mean of the two gradients that came: -(2 + 4) / 2.
  EXPECT_EQ((*pull.snap->weights)[0], -3.0f);
  std::vector<std::string> dropped = log.WaitForLines("worker 2 dropped", 1, absl::Seconds(1));
  ASSERT_THAT(dropped, SizeIs(1));
  const size_t at = dropped[0].find("no request for ");
  ASSERT_NE(at, std::string::npos) << dropped[0];
  const double silent = std::strtod(dropped[0].c_str() + at + 15, nullptr);
  EXPECT_GE(silent, 0.3) << dropped[0];
  EXPECT_LT(silent, 0.55) << dropped[0];
  ShardStats st = shard->Stats();
  EXPECT_THAT(st.dropped_workers, ElementsAre(2));
  EXPECT_THAT(st.live_workers, ElementsAre(0, 1));
  // Its late gradient for step 0 is dropped; then it is back.
  absl::StatusOr<PushResult> late = PushWithOutcome(shard.get(), 2, 0, g0.data);
  ASSERT_TRUE(late.ok()) << late.status();
  EXPECT_EQ(late->outcome, PushOutcome::kDropped);
  EXPECT_EQ(shard->Stats().pushes_dropped, 1);
  EXPECT_THAT(log.WaitForLines("worker 2 is back", 1, absl::ZeroDuration()), SizeIs(1));
  EXPECT_THAT(shard->Stats().dropped_workers, IsEmpty());
  EXPECT_THAT(shard->Stats().waiting_for, ElementsAre(0, 1, 2));
}

TEST(Shard, AdoptWorkerCopyInstallsItOnlyWhereTheShardIsBehind) {
  LogCapture log;
  ShardOptions o;
  o.num_workers = 2;
  o.mode = Mode::kSync;
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
  // Empty: installed at the copy's version, by any worker.
  absl::StatusOr<bool> r = shard->AdoptWorkerCopy(1, kSpec, copy.data, 7);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(*r);
  EXPECT_EQ(shard->Stats().version, 7);
  EXPECT_THAT(log.WaitForLines("restored to version 7 from worker 1", 1, absl::Seconds(1)),
              SizeIs(1));
  // At or behind the shard: nothing changes.
  Slices other = Encode(kSpec, 1, 0, {{0, 0, 0, 0}, {0, 0, 0}});
  EXPECT_FALSE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 7));
  EXPECT_FALSE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 3));
  // Ahead: installed, and a pull waiting for it is released.
  PullResult pull;
  StartPull(shard.get(), 0, 9, absl::Seconds(10), &pull);
  EXPECT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, other.data, 9));
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pull.snap.ok());
  EXPECT_EQ((*pull.snap->weights)[0], 0.0f);
  // Another spec is refused.
  const ModelSpec wrong = {{"w", {2, 2}}, {"c", {3}}};
  Slices w = Encode(wrong, 1, 0, {{0, 0, 0, 0}, {0, 0, 0}});
  EXPECT_EQ(shard->AdoptWorkerCopy(0, wrong, w.data, 20).status().code(),
            absl::StatusCode::kFailedPrecondition);
}

TEST(Shard, AdoptWorkerCopyGivesEveryWorkerALease) {
  // A worker that died while this shard was down is then dropped after one
  // lease (Membership::ExpectAll, in membership_test) instead of waited for.
  for (absl::Duration timeout : {absl::Seconds(30), absl::ZeroDuration()}) {
    ShardOptions o;
    o.num_workers = 2;
    o.mode = Mode::kSync;
    o.worker_timeout = timeout;
    o.log = nullptr;
    auto shard = *Shard::Create(o);
    Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
    ASSERT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, copy.data, 5));
    const ShardStats st = shard->Stats();
    EXPECT_THAT(st.workers_seen, ElementsAre(0));
    if (timeout > absl::ZeroDuration()) {
      EXPECT_THAT(st.live_workers, ElementsAre(0, 1));  // worker 1 never sent anything
    } else {
      EXPECT_THAT(st.live_workers, IsEmpty());  // no leases
    }
  }
}

TEST(Shard, LoadedCheckpointContinuesItsRunAsTheNextStart) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  absl::StatusOr<ShardState> state = shard->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->incarnation, shard->incarnation());
  EXPECT_NE(shard->incarnation().run_id, 0u);
  EXPECT_EQ(shard->incarnation().start, 1);
  auto again = MakeShard(Mode::kSync, 2);
  EXPECT_NE(again->incarnation().run_id, shard->incarnation().run_id);
  ASSERT_TRUE(again->LoadCheckpoint(*state).ok());
  EXPECT_EQ(again->incarnation(), (Incarnation{shard->incarnation().run_id, 2}));
}

TEST(Shard, PullTimesOutNamingMissingWorkers) {
  auto shard = MakeShard(Mode::kSync, 3);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g.data).ok());
  PullResult pull;
  StartPull(shard.get(), 1, 1, absl::Milliseconds(200), &pull);
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(10)));
  EXPECT_EQ(pull.snap.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_THAT(std::string(pull.snap.status().message()), HasSubstr("workers [0, 2]"));
}

// Crosses a real timer (the waiters' thread rings the report), for about
// 20 ms; the report rule (2x, 4x, ..., the next step's own clock, no report
// before a push, none in async mode or when off) is in stall_reporter_test.
TEST(Shard, SyncStepWaitingForAWorkerIsReportedUntilItCompletes) {
  LogCapture log;
  auto shard = MakeReportingShard(Mode::kSync, 3, absl::Milliseconds(20), &log);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  ASSERT_TRUE(PushSlices(shard.get(), 1, 0, g.data).ok());
  const std::vector<std::string> reports = log.WaitForLines("has waited", 1, absl::Seconds(30));
  ASSERT_EQ(reports.size(), 1u) << "no stall report within 30 s";
  EXPECT_THAT(reports[0], MatchesRegex("shard 0: step 0 has waited [0-9]+\\.[0-9]s for gradients "
                                       "from workers \\[2\\] \\(received from \\[0, 1\\]\\)"));
  EXPECT_TRUE(log.WaitForLines("completed", 1, absl::ZeroDuration()).empty());
  // The completion line is logged before the completing push returns.
  ASSERT_EQ(*PushSlices(shard.get(), 2, 0, g.data), 1);
  const std::vector<std::string> done = log.WaitForLines("completed", 1, absl::ZeroDuration());
  ASSERT_EQ(done.size(), 1u);
  EXPECT_THAT(done[0], MatchesRegex("shard 0: step 0 completed after [0-9]+\\.[0-9]s"));
}

TEST(Shard, StepThatWaitedLessThanTheReportTimeCompletesSilently) {
  LogCapture log;
  auto shard = MakeReportingShard(Mode::kSync, 2, absl::Minutes(10), &log);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  ASSERT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 1);
  EXPECT_THAT(log.Lines(), ::testing::IsEmpty());
}

TEST(Shard, PullBeforeInitWaitsForWorkerZero) {
  auto shard = MakeShard(Mode::kSync, 2);
  PullResult pull;
  StartPull(shard.get(), 1, 0, absl::Seconds(10), &pull);
  EXPECT_FALSE(pull.done.HasBeenNotified());
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
  ASSERT_TRUE(pull.snap.ok());
  EXPECT_EQ(*pull.snap->weights, (std::vector<float>{1, 2, 3, 4, 5, 6, 7}));
}

TEST(Shard, AsyncAppliesEachPushAndRecordsStaleness) {
  auto shard = MakeShard(Mode::kAsync, 2, 1.0f);
  InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(*PushSlices(shard.get(), 0, 0, g.data), 1);  // staleness 0
  EXPECT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 2);  // computed on v0, applied at v1
  EXPECT_EQ(*PushSlices(shard.get(), 1, 2, g.data), 3);  // staleness 0
  const ShardStats st = shard->Stats();
  EXPECT_EQ(st.version, 3);
  EXPECT_EQ(st.pushes_accepted, 3);
  EXPECT_EQ(st.max_staleness, 1);
  EXPECT_DOUBLE_EQ(st.mean_staleness, 1.0 / 3);
  EXPECT_EQ(PushSlices(shard.get(), 0, 7, g.data).status().code(), absl::StatusCode::kFailedPrecondition);
}

// --staleness_lr=inverse: a gradient computed on v0 and applied at v1
// moves the weights by lr / 2; with none, by lr; sync keeps lr.
TEST(Shard, InverseStalenessLrDividesAnAsyncGradientsRate) {
  for (StalenessLr rule : {StalenessLr::kNone, StalenessLr::kInverse}) {
    ShardOptions o;
    o.num_workers = 2;
    o.mode = Mode::kAsync;
    o.optimizer.learning_rate = 1.0;
    o.staleness_lr = rule;
    auto shard = *Shard::Create(o);
    InitShard(shard.get(), {{0, 0, 0, 0}, {0, 0, 0}});
    Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
    EXPECT_EQ(*PushSlices(shard.get(), 0, 0, g.data), 1);  // fresh: w = -1
    EXPECT_EQ(*PushSlices(shard.get(), 1, 0, g.data), 2);  // staleness 1
    PullResult pull;
    StartPull(shard.get(), 0, 2, absl::Seconds(5), &pull);
    ASSERT_TRUE(pull.done.WaitForNotificationWithTimeout(absl::Seconds(5)));
    ASSERT_TRUE(pull.snap.ok());
    const float want = rule == StalenessLr::kInverse ? -1.5f : -2.0f;
    EXPECT_EQ(*pull.snap->weights, std::vector<float>(7, want)) << StalenessLrName(rule);
  }
}

// A worker's copy holds no optimizer state: Adam's starts afresh at the
// copy's version, and the restore line says so.
TEST(Shard, AdoptWorkerCopyResetsTheOptimizerStateAndSaysSo) {
  LogCapture log;
  ShardOptions o;
  o.num_workers = 1;
  o.mode = Mode::kSync;
  o.optimizer.name = "adam";
  o.optimizer.learning_rate = 0.01;
  o.log = log.Sink();
  auto shard = *Shard::Create(o);
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(*PushSlices(shard.get(), 0, 0, g.data), 1);
  auto fresh_at = [&](int64_t version) {
    return *(*CreateOptimizer(o.optimizer, 7, version))->SaveState();
  };
  EXPECT_NE(shard->ExportState()->optimizer_state, fresh_at(0));  // the push moved it
  Slices copy = Encode(kSpec, 1, 0, {{5, 6, 7, 8}, {9, 9, 9}});
  ASSERT_TRUE(*shard->AdoptWorkerCopy(0, kSpec, copy.data, 5));
  EXPECT_EQ(shard->ExportState()->optimizer_state, fresh_at(5));
  EXPECT_THAT(log.WaitForLines("the adam optimizer state (moments, step count) was reset", 1,
                               absl::Seconds(1)),
              SizeIs(1));
}

TEST(Shard, AppliedGradientBuffersAreRecycled) {
  for (Mode mode : {Mode::kAsync, Mode::kSync}) {
    auto shard = MakeShard(mode, 1, 1.0f);
    InitShard(shard.get(), {{1, 1, 1, 1}, {1, 1, 1}});
    Slices g = Encode(kSpec, 1, 0, {{0.5f, 0.5f, 0.5f, 0.5f}, {0.5f, 0.5f, 0.5f}});
    absl::StatusOr<GradientAssembly> a = shard->StartPush(0, 0);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->data(), nullptr);  // no buffer before the first chunk
    for (const RawTensorSlice& c : g.data) ASSERT_TRUE(a->Add(c).ok());
    const float* data = a->data();
    ASSERT_NE(data, nullptr);
    absl::StatusOr<AssembledGradient> grad = std::move(*a).Finish();
    ASSERT_TRUE(grad.ok()) << grad.status();
    ASSERT_EQ(grad->values.size(), 7u);
    ASSERT_EQ(shard->Push(*std::move(grad))->version, 1);
    // The same memory, still holding the applied gradient (a fresh one is
    // zeroed): the first chunk rewrites only "w", so "b" shows what was left.
    absl::StatusOr<GradientAssembly> b = shard->StartPush(0, 1);
    ASSERT_TRUE(b.ok());
    Slices w = Encode(kSpec, 1, 0, {{2, 2, 2, 2}, {0, 0, 0}});
    ASSERT_TRUE(b->Add(w.data[0]).ok());
    EXPECT_EQ(b->data(), data) << ModeName(mode);
    EXPECT_EQ(std::vector<float>(b->data(), b->data() + 7),
              (std::vector<float>{2, 2, 2, 2, 0.5f, 0.5f, 0.5f}))
        << ModeName(mode);
    PullResult pull;
    StartPull(shard.get(), 0, 1, absl::Seconds(1), &pull);
    EXPECT_EQ(*pull.snap->weights, std::vector<float>(7, 0.5f));
  }
}

TEST(Shard, PendingPushesAreLimitedAndCountedInStats) {
  ShardOptions o;
  o.max_pending_pushes = 1;
  auto shard = Shard::Create(o);
  ASSERT_TRUE(shard.ok());
  InitShard(shard->get(), {{1, 2, 3, 4}, {0, 0, 0}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  absl::StatusOr<GradientAssembly> first = (*shard)->StartPush(0, 0);
  ASSERT_TRUE(first.ok());
  ASSERT_TRUE(first->Add(g.data[0]).ok());
  EXPECT_EQ((*shard)->Stats().pending_pushes, 1);
  absl::StatusOr<GradientAssembly> second = (*shard)->StartPush(0, 0);
  ASSERT_TRUE(second.ok());
  const absl::Status refused = second->Add(g.data[0]);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.message()), HasSubstr("--max_pending_pushes"));
  first = absl::CancelledError("dropped");  // frees its buffer
  EXPECT_EQ((*shard)->Stats().pending_pushes, 0);
  EXPECT_EQ(*PushSlices(shard->get(), 0, 0, g.data), 1);
  const ShardStats st = (*shard)->Stats();
  EXPECT_EQ(st.pending_pushes, 0);
  EXPECT_EQ(st.pushes_accepted, 1);
  EXPECT_EQ(st.push_latency.count, 1);
}

TEST(Shard, SnapshotIsImmutableWhileUpdatesApply) {
  auto shard = MakeShard(Mode::kAsync, 1, 1.0f);
  InitShard(shard.get(), {{1, 1, 1, 1}, {1, 1, 1}});
  PullResult pull;
  StartPull(shard.get(), 0, 0, absl::Seconds(1), &pull);
  ASSERT_TRUE(pull.done.HasBeenNotified());
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  EXPECT_EQ(*pull.snap->weights, std::vector<float>(7, 1.0f));
  PullResult after;
  StartPull(shard.get(), 0, 0, absl::Seconds(1), &after);
  EXPECT_EQ(*after.snap->weights, std::vector<float>(7, 0.0f));
}

TEST(Shard, LateWorkerWaitsForInitAndMismatchedSpecIsRejected) {
  auto shard = MakeShard(Mode::kSync, 2);
  absl::Notification joined;
  absl::StatusOr<int64_t> joined_version;
  shard->Init(1, kSpec, {}, absl::Seconds(10), [&](absl::StatusOr<int64_t> v, bool created) {
    EXPECT_FALSE(created);
    joined_version = v;
    joined.Notify();
  });
  EXPECT_FALSE(joined.HasBeenNotified());
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  ASSERT_TRUE(joined.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_TRUE(joined_version.ok()) << joined_version.status();

  const ModelSpec other = {{"w", {2, 3}}, {"b", {3}}};
  auto bad = InitSync(shard.get(), 1, other, {});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("w[2,3]"));
}

TEST(Shard, PushBeforeInitIsRejected) {
  auto shard = MakeShard(Mode::kSync, 2);
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  EXPECT_EQ(PushSlices(shard.get(), 0, 0, g.data).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->StartPush(0, 0).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(shard->Stats().pushes_accepted, 0);
}

TEST(Shard, OnlyWorkerZeroCreates) {
  auto shard = MakeShard(Mode::kSync, 2);
  Slices s = Encode(kSpec, 1, 0, {{1, 2, 3, 4}, {0, 0, 0}});
  EXPECT_EQ(InitSync(shard.get(), 1, kSpec, s.data).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(Shard, ExportedStateLoadsIntoAFreshShard) {
  auto shard = MakeShard(Mode::kSync, 1);
  InitShard(shard.get(), {{1, 2, 3, 4}, {5, 6, 7}});
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard.get(), 0, 0, g.data).ok());
  auto state = shard->ExportState();
  ASSERT_TRUE(state.ok());
  EXPECT_EQ(state->version, 1);

  auto fresh = MakeShard(Mode::kSync, 1);
  ASSERT_TRUE(fresh->LoadCheckpoint(*state).ok());
  PullResult pull;
  StartPull(fresh.get(), 0, 1, absl::Seconds(1), &pull);
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_EQ(pull.snap->version, 1);
  EXPECT_EQ(*pull.snap->weights, state->weights);
  // Training continues at step 1.
  EXPECT_EQ(*PushSlices(fresh.get(), 0, 1, g.data), 2);
}

TEST(Checkpoint, BytesRoundTripIntoAFreshShardOfTheSamePosition) {
  ShardOptions o;
  o.shard_id = 1;
  o.num_shards = 2;
  auto a = Shard::Create(o);
  ASSERT_TRUE(a.ok());
  const TensorList init = {{1, 2, 3, 4}, {5, 6, 7}};
  Slices s = Encode(kSpec, 2, 1, init);
  ASSERT_TRUE(InitSync(a->get(), 0, kSpec, s.data).ok());
  ASSERT_TRUE(PushSlices(a->get(), 0, 0, s.data).ok());
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

TEST(Shard, ShardThatOwnsNoElementsStillInitsAndAdvances) {
  // A 2-element tensor over 3 shards leaves shard 0 with nothing.
  const ModelSpec tiny = {{"t", {2}}};
  ShardOptions o;
  o.shard_id = 0;
  o.num_shards = 3;
  o.num_workers = 2;
  auto shard = Shard::Create(o);
  ASSERT_TRUE(shard.ok());
  ASSERT_TRUE(ShardSlices(tiny, 3, 0).empty());
  ASSERT_TRUE(InitSync(shard->get(), 0, tiny, {}).ok());
  EXPECT_TRUE(InitSync(shard->get(), 1, tiny, {}).ok());
  EXPECT_EQ(*PushSlices(shard->get(), 0, 0, {}), 0);
  EXPECT_EQ(*PushSlices(shard->get(), 1, 0, {}), 1);
}

TEST(Shard, CancelWaitEndsOnlyThatPull) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult a, b;
  const uint64_t ta = shard->Pull(0, 1, absl::Seconds(60), [&a](absl::StatusOr<WeightsSnapshot> s) {
    a.snap = std::move(s);
    a.done.Notify();
  });
  StartPull(shard.get(), 1, 1, absl::Seconds(60), &b);
  ASSERT_NE(ta, 0u);
  EXPECT_EQ(shard->Stats().waiting_calls, 2);
  shard->CancelWait(ta);
  ASSERT_TRUE(a.done.HasBeenNotified());
  EXPECT_EQ(a.snap.status().code(), absl::StatusCode::kCancelled);
  EXPECT_FALSE(b.done.HasBeenNotified());
  EXPECT_EQ(shard->Stats().waiting_calls, 1);
  shard->CancelWait(ta);  // already gone: no-op
  shard->Close();         // ends `b` while it is still in scope
  ASSERT_TRUE(b.done.HasBeenNotified());
}

TEST(Shard, PullsPastMaxWaitingCallsFailAtOnceAndServedPullsAreCounted) {
  ShardOptions o;
  o.num_workers = 2;
  o.max_waiting_calls = 1;
  auto shard = Shard::Create(o);
  ASSERT_TRUE(shard.ok());
  InitShard(shard->get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult now, waiting, refused;
  StartPull(shard->get(), 0, 0, absl::Seconds(60), &now);
  ASSERT_TRUE(now.done.HasBeenNotified());
  StartPull(shard->get(), 0, 1, absl::Seconds(60), &waiting);
  StartPull(shard->get(), 1, 1, absl::Seconds(60), &refused);
  ASSERT_TRUE(refused.done.HasBeenNotified());
  EXPECT_EQ(refused.snap.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(refused.snap.status().message()),
              HasSubstr("shard 0 already has 1 calls waiting for a version (--max_waiting_calls)"));
  Slices g = Encode(kSpec, 1, 0, {{1, 1, 1, 1}, {1, 1, 1}});
  ASSERT_TRUE(PushSlices(shard->get(), 0, 0, g.data).ok());
  ASSERT_EQ(*PushSlices(shard->get(), 1, 0, g.data), 1);
  ASSERT_TRUE(waiting.done.HasBeenNotified());
  ASSERT_TRUE(waiting.snap.ok());
  const ShardStats st = (*shard)->Stats();
  EXPECT_EQ(st.pulls_served, 2);
  EXPECT_EQ(st.pull_latency.count, 2);
  EXPECT_EQ(st.waiting_calls, 0);
  EXPECT_EQ((*shard)->metrics().version.Get(), 1);
}

TEST(Shard, CloseFailsWaitingPulls) {
  auto shard = MakeShard(Mode::kSync, 2);
  InitShard(shard.get(), {{1, 2, 3, 4}, {0, 0, 0}});
  PullResult pull;
  StartPull(shard.get(), 0, 1, absl::Seconds(60), &pull);
  shard->Close();
  ASSERT_TRUE(pull.done.HasBeenNotified());
  EXPECT_EQ(pull.snap.status().code(), absl::StatusCode::kUnavailable);
}

}  // namespace
}  // namespace ps
