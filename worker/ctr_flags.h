// ps_worker --model=ctr's own flags (--ctr_*), defined here once, and the
// CtrWorkerOptions (worker/ctr_worker.h) they make with the flags both
// models share (--worker_id, --num_workers, --batch_size, --max_steps,
// --epochs, --seed, --eval_every, --log_every, --metrics_file, --threads),
// taken from a WorkerConfig (worker/worker_flags.h).
#ifndef PS_WORKER_CTR_FLAGS_H_
#define PS_WORKER_CTR_FLAGS_H_

#include "absl/status/statusor.h"
#include "worker/ctr_worker.h"
#include "worker/worker_flags.h"

namespace ps {

// INVALID_ARGUMENT naming the flag: a bad --ctr_hidden or --ctr_format,
// and what CtrWorkerOptions::Validate refuses. `log` is left unset.
absl::StatusOr<CtrWorkerOptions> CtrWorkerOptionsFromFlags(const WorkerConfig& config);

}  // namespace ps

#endif  // PS_WORKER_CTR_FLAGS_H_
