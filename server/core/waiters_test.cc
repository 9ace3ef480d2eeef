#include "server/core/waiters.h"

#include <memory>
#include <string>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/testing/fake_clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// What one waiting call got.
struct Outcome {
  absl::Notification done;
  absl::StatusOr<WeightsSnapshot> result = absl::UnknownError("not called");

  Waiters::Callback Callback() {
    return [this](absl::StatusOr<WeightsSnapshot> r) {
      result = std::move(r);
      done.Notify();
    };
  }
};

uint64_t AddOrDie(Waiters* w, int64_t version, absl::Duration wait, Outcome* out) {
  Waiters::Callback cb = out->Callback();
  absl::StatusOr<uint64_t> ticket = w->Add(version, wait, &cb);
  EXPECT_TRUE(ticket.ok()) << ticket.status();
  return ticket.ok() ? *ticket : 0;
}

// Options on `clock`: no thread, and time moves only when the test says.
WaitersOptions On(FakeClock* clock) {
  WaitersOptions o;
  o.clock = clock;
  return o;
}

TEST(Waiters, TakeReadyReleasesExactlyTheCallsAtOrBelowTheVersion) {
  Gauge waiting;
  FakeClock clock;
  WaitersOptions o = On(&clock);
  o.waiting = &waiting;
  Outcome v1, v2, v3;  // outlive `w`, which fails what still waits when destroyed
  Waiters w(o);
  AddOrDie(&w, 2, absl::Seconds(60), &v2);
  AddOrDie(&w, 1, absl::Seconds(60), &v1);
  AddOrDie(&w, 3, absl::Seconds(60), &v3);
  EXPECT_EQ(waiting.Get(), 3);
  std::vector<Waiters::Callback> ready = w.TakeReady(2);
  ASSERT_EQ(ready.size(), 2u);
  EXPECT_EQ(w.size(), 1);
  EXPECT_EQ(waiting.Get(), 1);
  // Lowest version first.
  ready[0](WeightsSnapshot{7, nullptr, nullptr});
  EXPECT_TRUE(v1.done.HasBeenNotified());
  EXPECT_FALSE(v2.done.HasBeenNotified());
  EXPECT_TRUE(w.TakeReady(2).empty());
}

TEST(Waiters, ACallWaitingForAStepNeedsItsVersionAndItsStep) {
  FakeClock clock;
  Outcome a, b, plain;
  Waiters w(On(&clock));
  auto add = [&w](int64_t version, int64_t step, Outcome* out) {
    Waiters::Callback cb = out->Callback();
    absl::StatusOr<uint64_t> t = w.Add(version, absl::Seconds(60), &cb, step);
    EXPECT_TRUE(t.ok()) << t.status();
    return t.ok() ? *t : 0;
  };
  add(0, /*step=*/3, &a);
  const uint64_t tb = add(5, /*step=*/1, &b);
  AddOrDie(&w, 1, absl::Seconds(60), &plain);  // names no step
  // The version alone releases only the call that names no step.
  EXPECT_EQ(w.TakeReady(1, /*step=*/0).size(), 1u);
  EXPECT_EQ(w.size(), 2);
  // Step 3 without version 5: only `a`; the step moving alone releases it.
  EXPECT_TRUE(w.TakeReady(1, 2).empty());
  std::vector<Waiters::Callback> ready = w.TakeReady(1, 3);
  ASSERT_EQ(ready.size(), 1u);
  ready[0](WeightsSnapshot{1, nullptr, nullptr});
  EXPECT_TRUE(a.done.HasBeenNotified());
  // `b` at version 5 with step 0 still waits for its step, and cancels
  // from there.
  EXPECT_TRUE(w.TakeReady(5, 0).empty());
  w.Cancel(tb);
  ASSERT_TRUE(b.done.HasBeenNotified());
  EXPECT_EQ(b.result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(w.size(), 0);
  EXPECT_TRUE(w.TakeReady(9, 9).empty());
}

TEST(Waiters, DeadlineEndsTheCallWithTheOwnersMessageExactlyWhenItPasses) {
  FakeClock clock;
  WaitersOptions o = On(&clock);
  o.timeout_message = [](int64_t version, absl::Duration waited) {
    return absl::StrCat("waited ", absl::FormatDuration(waited), " for ", version);
  };
  Outcome out;
  Waiters w(o);
  AddOrDie(&w, 5, absl::Milliseconds(20), &out);
  clock.Advance(absl::Milliseconds(20) - absl::Nanoseconds(1));
  EXPECT_FALSE(out.done.HasBeenNotified());
  EXPECT_EQ(w.size(), 1);
  clock.Advance(absl::Nanoseconds(1));
  ASSERT_TRUE(out.done.HasBeenNotified());
  EXPECT_EQ(out.result.status().code(), absl::StatusCode::kDeadlineExceeded);
  EXPECT_EQ(out.result.status().message(), "waited 20ms for 5");
  EXPECT_EQ(w.size(), 0);
}

TEST(Waiters, AnEarlierDeadlineAddedLaterEndsFirst) {
  FakeClock clock;
  Outcome late, early;
  Waiters w(On(&clock));
  AddOrDie(&w, 1, absl::Seconds(60), &late);
  AddOrDie(&w, 1, absl::Seconds(5), &early);
  clock.Advance(absl::Seconds(5));
  EXPECT_TRUE(early.done.HasBeenNotified());
  EXPECT_FALSE(late.done.HasBeenNotified());
  clock.Advance(absl::Seconds(55));
  EXPECT_TRUE(late.done.HasBeenNotified());
  EXPECT_EQ(late.result.status().code(), absl::StatusCode::kDeadlineExceeded);
}

TEST(Waiters, WaitIsClampedToTheMaximumAndZeroMeansTheDefault) {
  FakeClock clock;
  std::vector<absl::Duration> granted;
  WaitersOptions o = On(&clock);
  o.default_wait = absl::Milliseconds(10);
  o.max_wait = absl::Milliseconds(30);
  o.timeout_message = [&](int64_t, absl::Duration waited) {
    granted.push_back(waited);
    return std::string("timeout");
  };
  Outcome a, b;
  Waiters w(o);
  AddOrDie(&w, 1, absl::ZeroDuration(), &a);
  AddOrDie(&w, 1, absl::Hours(1), &b);
  clock.Advance(absl::Milliseconds(10));
  EXPECT_TRUE(a.done.HasBeenNotified());
  EXPECT_FALSE(b.done.HasBeenNotified());
  clock.Advance(absl::Milliseconds(20));
  EXPECT_TRUE(b.done.HasBeenNotified());
  EXPECT_THAT(granted, ::testing::ElementsAre(absl::Milliseconds(10), absl::Milliseconds(30)));
}

TEST(Waiters, CancelEndsOnlyThatCallOnce) {
  FakeClock clock;
  WaitersOptions o = On(&clock);
  o.name = "shard 3";
  Outcome a, b;
  Waiters w(o);
  const uint64_t ta = AddOrDie(&w, 1, absl::Seconds(60), &a);
  AddOrDie(&w, 1, absl::Seconds(60), &b);
  w.Cancel(ta);
  ASSERT_TRUE(a.done.HasBeenNotified());
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(a.result.status().message(), "shard 3: call cancelled");
  w.Cancel(ta);  // gone: no-op
  EXPECT_FALSE(b.done.HasBeenNotified());
  EXPECT_EQ(w.size(), 1);
}

TEST(Waiters, FullQueueRefusesAndLeavesTheCallbackToTheCaller) {
  FakeClock clock;
  WaitersOptions o = On(&clock);
  o.name = "shard 0";
  o.max_waiting = 1;
  Outcome a, b;
  Waiters w(o);
  AddOrDie(&w, 1, absl::Seconds(60), &a);
  Waiters::Callback cb = b.Callback();
  absl::StatusOr<uint64_t> t = w.Add(1, absl::Seconds(60), &cb);
  EXPECT_EQ(t.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(t.status().message()),
              HasSubstr("shard 0 already has 1 calls waiting for a version (--max_waiting_calls)"));
  ASSERT_TRUE(cb != nullptr);
}

TEST(Waiters, CloseFailsEveryCallAndLaterAddsAndRingsNoMore) {
  FakeClock clock;
  int alarms = 0;
  WaitersOptions o = On(&clock);
  o.on_alarm = [&](absl::Time) { ++alarms; };
  Outcome a, b;
  Waiters w(o);
  AddOrDie(&w, 1, absl::Seconds(60), &a);
  w.WakeAt(clock.Now() + absl::Seconds(1));
  w.Close(absl::UnavailableError("going away"));
  ASSERT_TRUE(a.done.HasBeenNotified());
  EXPECT_EQ(a.result.status().code(), absl::StatusCode::kUnavailable);
  Waiters::Callback cb = b.Callback();
  EXPECT_EQ(w.Add(1, absl::Seconds(60), &cb).status().message(), "going away");
  w.WakeAt(clock.Now() + absl::Seconds(2));
  EXPECT_EQ(clock.pending(), 0);
  clock.Advance(absl::Minutes(5));
  EXPECT_EQ(alarms, 0);
}

TEST(Waiters, AlarmRingsOnceAtTheEarliestTimeAskedWithThatTime) {
  FakeClock clock;
  std::vector<absl::Time> rang;
  WaitersOptions o = On(&clock);
  o.on_alarm = [&](absl::Time now) { rang.push_back(now); };
  Waiters w(o);
  const absl::Time start = clock.Now();
  w.WakeAt(start + absl::Seconds(60));
  w.WakeAt(start + absl::Milliseconds(20));  // earlier wins
  w.WakeAt(start + absl::Seconds(30));       // later: no-op
  clock.Advance(absl::Milliseconds(20) - absl::Nanoseconds(1));
  EXPECT_THAT(rang, ::testing::IsEmpty());
  clock.Advance(absl::Nanoseconds(1));
  EXPECT_THAT(rang, ::testing::ElementsAre(start + absl::Milliseconds(20)));
  // The timer keeps one alarm: the later times were dropped (on_alarm sets
  // again what it still needs).
  clock.Advance(absl::Minutes(5));
  EXPECT_THAT(rang, ::testing::SizeIs(1));
}

// The alarm and a deadline at the same time: the alarm first, then the
// timeout, both from one event.
TEST(Waiters, AnAlarmAndADeadlineDueTogetherRunAlarmFirst) {
  FakeClock clock;
  std::vector<std::string> order;
  WaitersOptions o = On(&clock);
  o.on_alarm = [&](absl::Time) { order.push_back("alarm"); };
  Waiters w(o);
  Waiters::Callback cb = [&](absl::StatusOr<WeightsSnapshot> r) {
    order.push_back(std::string(absl::StatusCodeToString(r.status().code())));
  };
  ASSERT_TRUE(w.Add(1, absl::Seconds(1), &cb).ok());
  w.WakeAt(clock.Now() + absl::Seconds(1));
  clock.Advance(absl::Seconds(1));
  EXPECT_THAT(order, ::testing::ElementsAre("alarm", "DEADLINE_EXCEEDED"));
}

// The timer of RealClock(): a thread, as in production.
TEST(Waiters, OnTheRealClockADeadlineEndsTheCallOnTheTimerThread) {
  Outcome out;
  Waiters w(WaitersOptions{});
  AddOrDie(&w, 5, absl::Milliseconds(1), &out);
  ASSERT_TRUE(out.done.WaitForNotificationWithTimeout(absl::Seconds(30)));
  EXPECT_EQ(out.result.status().code(), absl::StatusCode::kDeadlineExceeded);
}

}  // namespace
}  // namespace ps
