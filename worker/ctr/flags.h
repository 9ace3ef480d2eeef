// ps_worker --model=ctr's own flags (--ctr_*), defined here once, and the
// CtrWorkload (worker/ctr/workload.h) they make with the flags every model
// shares (SharedWorkloadFlags, worker/train/workload.h) and the OpenBLAS
// threads of its math (--threads).
#ifndef PS_WORKER_CTR_FLAGS_H_
#define PS_WORKER_CTR_FLAGS_H_

#include <memory>

#include "absl/status/statusor.h"
#include "worker/ctr/workload.h"
#include "worker/train/param_store.h"
#include "worker/train/workload.h"

namespace ps {

// INVALID_ARGUMENT naming the flag: a bad --ctr_hidden or --ctr_format,
// and what CtrOptions::Validate refuses.
absl::StatusOr<CtrOptions> CtrOptionsFromFlags(const SharedWorkloadFlags& shared, int threads);

// --standalone's in-process rules for this model: Adam at --ctr_dense_lr
// for the MLP, AdaGrad at --ctr_sparse_lr for the rows (CtrStandaloneStore).
// INVALID_ARGUMENT naming the flag for a rate that is not > 0.
absl::StatusOr<LocalStoreOptions> CtrStandaloneStoreFromFlags();

// CtrWorkload::Create(CtrOptionsFromFlags(shared, threads)). Errors: theirs.
absl::StatusOr<std::unique_ptr<Workload>> CtrWorkloadFromFlags(const SharedWorkloadFlags& shared,
                                                               int threads);

}  // namespace ps

#endif  // PS_WORKER_CTR_FLAGS_H_
