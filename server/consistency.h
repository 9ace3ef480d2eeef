// ConsistencyPolicy: decides when pushed gradients are applied.
//
// The shard validates each push (worker id, slices, sizes) and offers the
// decoded gradient to its policy, which either keeps it (sync: until every
// worker's gradient for the step is in) or hands back a gradient for the
// shard to apply once and advance its version by one.
//
// Sync and async now; bounded staleness and backup workers fit the same
// interface later. Not thread-safe: the shard calls it under its lock.
#ifndef PS_SERVER_CONSISTENCY_H_
#define PS_SERVER_CONSISTENCY_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "common/mode.h"

namespace ps {

class ConsistencyPolicy {
 public:
  virtual ~ConsistencyPolicy() = default;

  virtual Mode mode() const = 0;

  // Offers `grad` from `worker_id`, computed on weights of version
  // `computed_version`, while the shard is at `current_version`.
  //   - Error: the push is rejected and nothing changes (e.g. sync push for a
  //     step other than the current one: FAILED_PRECONDITION naming both; a
  //     second push by the same worker for the same step: ALREADY_EXISTS).
  //   - true: apply the mean of `*to_apply` (summed in their order, then
  //     divided by their count) once, then version += 1. (The buffers may be
  //     empty: a shard that owns no elements still advances its version.)
  //   - false: kept; nothing to apply yet.
  // REQUIRES: 0 <= worker_id < num_workers; grad has the shard's size.
  virtual absl::StatusOr<bool> OnPush(int worker_id, int64_t computed_version,
                                      int64_t current_version, std::vector<float> grad,
                                      std::vector<std::vector<float>>* to_apply) = 0;

  // Workers whose gradient for the current step has not arrived (sync);
  // always empty in async mode.
  virtual std::vector<int> MissingWorkers() const = 0;
};

std::unique_ptr<ConsistencyPolicy> CreateConsistencyPolicy(Mode mode, int num_workers);

}  // namespace ps

#endif  // PS_SERVER_CONSISTENCY_H_
