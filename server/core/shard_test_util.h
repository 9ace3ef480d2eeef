// What server/core/shard_test.cc (the push, pull and init rules) and
// server/core/shard_recovery_test.cc (faults and recovery) share: gradients and
// weights encoded as a shard's slices, unary pushes, pulls and inits driven
// to completion, and a small sync or async Shard over kSpec. Test-only.
//
// The tests' shards run on a FakeClock (common/testing/fake_clock.h): no
// timer thread, so every callback runs on the test's thread, during the call
// that completes it or the clock's Advance that times it out.
#ifndef PS_SERVER_CORE_SHARD_TEST_UTIL_H_
#define PS_SERVER_CORE_SHARD_TEST_UTIL_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/time.h"
#include "common/clock.h"
#include "common/status_macros.h"
#include "gtest/gtest.h"
#include "server/core/shard.h"

namespace ps {
namespace shard_testing {

// Encoded slices of `values` for every slice of `layout`.
struct Slices {
  std::vector<std::string> bytes;
  std::vector<RawTensorSlice> data;
};

inline Slices Encode(const ModelSpec& spec, int num_shards, int shard, const TensorList& values) {
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
inline absl::StatusOr<PushResult> PushWithOutcome(Shard* shard, int worker, int64_t version,
                                                  const std::vector<RawTensorSlice>& slices) {
  ASSIGN_OR_RETURN(GradientAssembly assembly, shard->StartPush(worker, version));
  RETURN_IF_ERROR(assembly.AddMessage(slices));
  ASSIGN_OR_RETURN(AssembledGradient grad, std::move(assembly).Finish());
  return shard->Push(std::move(grad));
}

// The version after a push the shard applied (or counted into its step).
inline absl::StatusOr<int64_t> PushSlices(Shard* shard, int worker, int64_t version,
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

inline void StartPull(Shard* shard, int worker, int64_t min_version, absl::Duration wait,
                      PullResult* out) {
  shard->Pull(worker, min_version, wait, [out](absl::StatusOr<WeightsSnapshot> s) {
    out->snap = std::move(s);
    out->done.Notify();
  });
}

// An init that completes at once: worker 0's, or anyone's once the
// parameters exist. One that would wait (for worker 0) is cancelled, and is
// FAILED_PRECONDITION.
inline absl::StatusOr<int64_t> InitSync(Shard* shard, int worker, const ModelSpec& spec,
                                        const std::vector<RawTensorSlice>& values) {
  absl::StatusOr<int64_t> result = absl::UnknownError("not called");
  const uint64_t waiting =
      shard->Init(worker, spec, values, absl::Seconds(5),
                  [&result](absl::StatusOr<int64_t> v, bool) { result = std::move(v); });
  if (waiting != 0) {
    shard->CancelWait(waiting);  // runs the callback while `result` lives
    return absl::FailedPreconditionError("the init waits for the parameters");
  }
  return result;
}

inline const ModelSpec kSpec = {{"w", {2, 2}}, {"b", {3}}};

// A shard on `clock`, which must outlive it.
inline std::unique_ptr<Shard> MakeShard(Mode mode, int workers, Clock* clock, float lr = 0.5f) {
  ShardOptions o;
  o.num_workers = workers;
  o.mode = mode;
  o.optimizer.learning_rate = lr;
  o.clock = clock;
  auto s = Shard::Create(o);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

inline void InitShard(Shard* shard, const TensorList& init) {
  Slices s = Encode(kSpec, 1, 0, init);
  auto v = InitSync(shard, 0, kSpec, s.data);
  ASSERT_TRUE(v.ok()) << v.status();
}

}  // namespace shard_testing
}  // namespace ps

#endif  // PS_SERVER_CORE_SHARD_TEST_UTIL_H_
