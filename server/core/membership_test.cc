#include "server/core/membership.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A fake clock: every time is an offset from t0.
const absl::Time t0 = absl::FromUnixSeconds(1000);
absl::Time At(double seconds) { return t0 + absl::Seconds(seconds); }

TEST(Membership, SeenIsKeptApartFromLeases) {
  Membership m(0, 3, absl::ZeroDuration());
  m.MarkSeen(2);
  m.MarkSeen({0, 2});
  EXPECT_THAT(m.seen(), ElementsAre(0, 2));
  // Without leases nothing is live, dropped or armed.
  EXPECT_FALSE(m.leases());
  LeaseEvents e = m.Touch(1, At(0), 0);
  EXPECT_THAT(e.changes, IsEmpty());
  EXPECT_EQ(e.wake_at, absl::InfiniteFuture());
  e = m.Expire(At(1000), 0);
  EXPECT_THAT(e.changes, IsEmpty());
  EXPECT_EQ(e.wake_at, absl::InfiniteFuture());
  EXPECT_EQ(m.ExpectAll(At(0)).wake_at, absl::InfiniteFuture());
  EXPECT_THAT(m.live(), IsEmpty());
  EXPECT_THAT(m.dropped(), IsEmpty());
}

TEST(Membership, FirstTouchArmsTheCheckAndLaterOnesDoNot) {
  Membership m(0, 3, absl::Seconds(3));
  EXPECT_EQ(m.Touch(0, At(0), 0).wake_at, At(3));
  // A check is set already, and leases only move later: no new alarm.
  EXPECT_EQ(m.Touch(0, At(1), 0).wake_at, absl::InfiniteFuture());
  EXPECT_EQ(m.Touch(1, At(2), 0).wake_at, absl::InfiniteFuture());
  EXPECT_THAT(m.live(), ElementsAre(0, 1));
  // Nobody is seen by Touch: registering or pushing is what MarkSeen says.
  EXPECT_THAT(m.seen(), IsEmpty());
}

TEST(Membership, ALeaseRunsOutExactlyAtItsTimeoutNotBefore) {
  Membership m(0, 2, absl::Seconds(3));
  m.Touch(1, At(0), 0);
  LeaseEvents early = m.Expire(At(3) - absl::Nanoseconds(1), 0);
  EXPECT_THAT(early.changes, IsEmpty());
  EXPECT_EQ(early.wake_at, At(3));
  LeaseEvents due = m.Expire(At(3), 0);
  ASSERT_EQ(due.changes.size(), 1u);
  EXPECT_EQ(due.changes[0].worker, 1);
  EXPECT_THAT(m.dropped(), ElementsAre(1));
}

TEST(Membership, SilentWorkerIsDroppedOnceItsLeaseRunsOut) {
  Membership m(4, 3, absl::Seconds(3));
  m.Touch(0, At(0), 0);
  m.Touch(2, At(0), 0);
  m.Touch(0, At(2), 1);
  // At 3 s worker 2's lease ran out; worker 0's runs to 5 s.
  LeaseEvents e = m.Expire(At(3.24), 7);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 2);
  EXPECT_FALSE(e.changes[0].live);
  EXPECT_EQ(e.changes[0].line,
            "shard 4: worker 2 dropped: no request for 3.2s (--worker_timeout=3s) at step 7; "
            "sync steps close without it until it is back");
  EXPECT_EQ(e.wake_at, At(5));
  EXPECT_THAT(m.live(), ElementsAre(0));
  EXPECT_THAT(m.dropped(), ElementsAre(2));
  // A dropped worker is not dropped again.
  e = m.Expire(At(5), 8);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 0);
  EXPECT_EQ(e.wake_at, absl::InfiniteFuture());
  EXPECT_THAT(m.dropped(), ElementsAre(0, 2));
}

TEST(Membership, ALeaseEndsExactlyAtTheTimeout) {
  Membership m(0, 1, absl::Milliseconds(300));
  m.Touch(0, At(0), 0);
  EXPECT_THAT(m.Expire(At(0.299), 0).changes, IsEmpty());
  EXPECT_THAT(m.Expire(At(0.3), 0).changes, ::testing::SizeIs(1));
}

TEST(Membership, WorkerNeverHeardFromIsNeverDropped) {
  Membership m(0, 3, absl::Seconds(1));
  m.Touch(0, At(0), 0);
  LeaseEvents e = m.Expire(At(100), 0);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 0);
  EXPECT_THAT(m.dropped(), ElementsAre(0));
  EXPECT_THAT(m.live(), IsEmpty());  // 1 and 2 hold no lease
}

TEST(Membership, DroppedWorkerComesBackWithItsNextRequest) {
  Membership m(0, 3, absl::Seconds(3));
  m.Touch(2, At(0), 0);
  ASSERT_THAT(m.Expire(At(3), 5).changes, ::testing::SizeIs(1));
  // The check found no lease left running: the return arms a new one.
  LeaseEvents e = m.Touch(2, At(10), 9);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 2);
  EXPECT_TRUE(e.changes[0].live);
  EXPECT_EQ(e.changes[0].line, "shard 0: worker 2 is back (at step 9); sync steps wait for it again");
  EXPECT_EQ(e.wake_at, At(13));
  EXPECT_THAT(m.dropped(), IsEmpty());
  EXPECT_THAT(m.live(), ElementsAre(2));
  // Its next request is an ordinary renewal.
  EXPECT_THAT(m.Touch(2, At(11), 9).changes, IsEmpty());
}

TEST(Membership, EarlyExpireChangesNothingAndRepeatsThePendingCheck) {
  // The owner's timer keeps one alarm, the earliest: when it rang for
  // something else (a stall report), the lease check must be set again.
  Membership m(0, 3, absl::Seconds(3));
  m.Touch(2, At(0), 0);
  for (double t : {0.04, 0.08, 0.16, 2.56}) {
    LeaseEvents e = m.Expire(At(t), 0);
    EXPECT_THAT(e.changes, IsEmpty()) << t;
    EXPECT_EQ(e.wake_at, At(3)) << t;
  }
  LeaseEvents e = m.Expire(At(3), 0);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_THAT(e.changes[0].line, ::testing::HasSubstr("no request for 3.0s"));
}

TEST(Membership, ExpectAllGivesWorkersNeverHeardFromALease) {
  // After a restart from a worker's copy the run is live: a worker that died
  // while the shard was down is dropped after one lease.
  Membership m(0, 3, absl::Seconds(2));
  m.Touch(0, At(0), 5);
  EXPECT_EQ(m.ExpectAll(At(1)).wake_at, absl::InfiniteFuture());  // the check at 2 s is set
  EXPECT_THAT(m.live(), ElementsAre(0, 1, 2));
  m.Touch(0, At(1.5), 5);
  LeaseEvents e = m.Expire(At(2), 5);
  EXPECT_THAT(e.changes, IsEmpty());  // worker 0 renewed; 1 and 2 run to 3 s
  EXPECT_EQ(e.wake_at, At(3));
  e = m.Expire(At(3), 5);
  ASSERT_EQ(e.changes.size(), 2u);
  EXPECT_EQ(e.changes[0].worker, 1);
  EXPECT_EQ(e.changes[1].worker, 2);
  EXPECT_EQ(e.wake_at, At(3.5));
  // On a fresh membership ExpectAll arms the check itself.
  Membership fresh(0, 2, absl::Seconds(2));
  EXPECT_EQ(fresh.ExpectAll(At(0)).wake_at, At(2));
}

// The registry's rule (a coordinator): everyone is expected until the
// first report, which leaves out silently those not in it; later a worker
// joins when its key appears and leaves at once when it goes.
TEST(Membership, RegistryExpectsOnlyRegisteredWorkers) {
  Membership m(1, 4, absl::ZeroDuration(), /*registry=*/true);
  EXPECT_TRUE(m.tracks_requests());
  EXPECT_THAT(m.live(), ElementsAre(0, 1, 2, 3));  // no report yet
  EXPECT_THAT(m.not_live(), IsEmpty());
  LeaseEvents e = m.Registered({0, 2, 7, -1}, At(0), 4);  // 7 and -1: out of range
  ASSERT_EQ(e.changes.size(), 2u);                        // 1 and 3 left out, without a line
  EXPECT_EQ(e.changes[0].worker, 1);
  EXPECT_FALSE(e.changes[0].live);
  EXPECT_TRUE(e.changes[0].line.empty());
  EXPECT_EQ(e.changes[1].worker, 3);
  EXPECT_FALSE(e.changes[1].expired);
  EXPECT_EQ(e.wake_at, absl::InfiniteFuture());  // no leases: no alarm
  EXPECT_THAT(m.live(), ElementsAre(0, 2));
  EXPECT_THAT(m.not_live(), ElementsAre(1, 3));
  // The same set again changes nothing.
  EXPECT_THAT(m.Registered({0, 2}, At(1), 4).changes, IsEmpty());
  // Worker 3 registers: it joins.
  e = m.Registered({0, 2, 3}, At(1), 5);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_TRUE(e.changes[0].live);
  EXPECT_THAT(e.changes[0].line,
              ::testing::HasSubstr("shard 1: worker 3 joined the job (registered in etcd) at "
                                   "step 5; sync steps wait for it"));
  // Worker 0's key goes: it leaves at once.
  e = m.Registered({2, 3}, At(2), 9);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 0);
  EXPECT_FALSE(e.changes[0].live);
  EXPECT_FALSE(e.changes[0].expired);
  EXPECT_THAT(e.changes[0].line, ::testing::HasSubstr("worker 0 left the job (its etcd key is "
                                                      "gone) at step 9; sync steps close without "
                                                      "it"));
  EXPECT_THAT(m.live(), ElementsAre(2, 3));
  EXPECT_THAT(m.not_live(), ElementsAre(0, 1));
}

// A worker whose key is there but does not count (loading its data, or
// waiting for an epoch to take a share of) is not brought in by its
// requests: it connects and pulls before it trains, and a step must not
// wait for it then.
TEST(Membership, AHeldWorkersRequestsDoNotBringItIn) {
  Membership m(0, 3, absl::ZeroDuration(), /*registry=*/true);
  m.Registered({0}, At(0), 3, /*held=*/{2});
  EXPECT_THAT(m.Touch(2, At(1), 3).changes, IsEmpty());
  EXPECT_THAT(m.live(), ElementsAre(0));
  // Ready: it joins the steps.
  LeaseEvents e = m.Registered({0, 2}, At(2), 5);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 2);
  EXPECT_TRUE(e.changes[0].live);
  EXPECT_THAT(m.live(), ElementsAre(0, 2));
  // Waiting again (an epoch that does not list it): it leaves them, and
  // its requests meanwhile do not bring it back.
  e = m.Registered({0}, At(3), 7, /*held=*/{2});
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_FALSE(e.changes[0].live);
  EXPECT_THAT(m.Touch(2, At(4), 7).changes, IsEmpty());
  EXPECT_THAT(m.live(), ElementsAre(0));
  // Worker 1, which holds no key, still comes in with a request.
  EXPECT_THAT(m.Touch(1, At(5), 7).changes, ::testing::SizeIs(1));
  // Worker 2's key goes while it waits: a late request of it does not
  // bring it in; its key back, ready, does.
  EXPECT_THAT(m.Registered({0}, At(6), 7).changes, IsEmpty());
  EXPECT_THAT(m.Touch(2, At(7), 7).changes, IsEmpty());
  EXPECT_THAT(m.live(), ElementsAre(0, 1));
  EXPECT_THAT(m.Registered({0, 2}, At(8), 8).changes, ::testing::SizeIs(1));
  EXPECT_THAT(m.live(), ElementsAre(0, 1, 2));
}

TEST(Membership, ARequestBringsBackAWorkerTheRegistryDoesNotList) {
  // Its key may still be on its way to the watch, or etcd lost it while
  // the worker went on training (or it has none: started with --servers).
  Membership m(0, 3, absl::ZeroDuration(), /*registry=*/true);
  m.Registered({0}, At(0), 3);
  LeaseEvents e = m.Touch(1, At(0), 3);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_TRUE(e.changes[0].live);
  EXPECT_THAT(e.changes[0].line, ::testing::HasSubstr("worker 1 is back (at step 3) before etcd "
                                                      "lists it"));
  EXPECT_THAT(m.live(), ElementsAre(0, 1));
  // A report about another worker leaves it alone: its key did not go.
  EXPECT_THAT(m.Registered({0, 2}, At(1), 3).changes, ::testing::SizeIs(1));  // 2 joins
  EXPECT_THAT(m.live(), ElementsAre(0, 1, 2));
  // Its key then appears and goes: it leaves.
  EXPECT_THAT(m.Registered({0, 1, 2}, At(2), 3).changes, IsEmpty());  // live already
  e = m.Registered({0, 2}, At(3), 4);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 1);
  EXPECT_FALSE(e.changes[0].live);
  // A request it sent before it left, arriving late, does not bring it
  // back (the steps would wait for a worker that is gone)...
  EXPECT_THAT(m.Touch(1, At(4), 4).changes, IsEmpty());
  EXPECT_THAT(m.live(), ElementsAre(0, 2));
  // ... its key does.
  e = m.Registered({0, 1, 2}, At(5), 5);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_TRUE(e.changes[0].live);
  EXPECT_THAT(m.live(), ElementsAre(0, 1, 2));
}

TEST(Membership, RegistryWithLeasesStartsTheLeaseAtRegistration) {
  // A worker that registers and never comes is dropped after one lease;
  // one out of the set is never dropped by its lease.
  Membership m(0, 3, absl::Seconds(2), /*registry=*/true);
  m.Registered({}, At(9), 0);  // nobody yet
  LeaseEvents e = m.Registered({0, 1}, At(10), 0);
  EXPECT_EQ(e.wake_at, At(12));
  m.Touch(0, At(11), 0);
  e = m.Expire(At(12), 0);
  ASSERT_EQ(e.changes.size(), 1u);  // worker 1, never heard; worker 2 is not in the set
  EXPECT_EQ(e.changes[0].worker, 1);
  EXPECT_FALSE(e.changes[0].live);
  EXPECT_TRUE(e.changes[0].expired);
  EXPECT_THAT(m.dropped(), ElementsAre(1));
  EXPECT_THAT(m.not_live(), ElementsAre(1, 2));
  // Its key goes later: it is away now, not dropped, and nothing is
  // reported twice.
  EXPECT_THAT(m.Registered({0}, At(13), 0).changes, IsEmpty());
  EXPECT_THAT(m.dropped(), IsEmpty());
  EXPECT_THAT(m.not_live(), ElementsAre(1, 2));
  // ExpectAll gives no lease to a worker out of the set.
  m.ExpectAll(At(14));
  e = m.Expire(At(100), 0);
  ASSERT_EQ(e.changes.size(), 1u);
  EXPECT_EQ(e.changes[0].worker, 0);  // its lease from 11 s ran out; 1 and 2 are away
}

}  // namespace
}  // namespace ps
