// Data order: which examples a worker trains on at each step.
//
// Each epoch every worker computes the same permutation of the training set
// (seeded by the run's seed and the epoch) and takes positions
// worker_id, worker_id + W, worker_id + 2W, ... of it; its batch t is the
// consecutive run t*b .. t*b+b-1 of that share. So the union of the W local
// batches at step t is exactly batch t of a single worker with batch size W*b,
// which makes sync mode checkable against single-process SGD.
//
// Pure functions; thread-safe.
#ifndef PS_WORKER_MLP_DATA_ORDER_H_
#define PS_WORKER_MLP_DATA_ORDER_H_

#include <cstdint>
#include <vector>

namespace ps {

// A permutation of [0, n) for `epoch`, the same on every host for the same
// arguments; the identity when shuffle is false.
std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int epoch, bool shuffle);

// Steps per epoch, equal for every worker: floor(floor(n / W) / b).
int64_t StepsPerEpoch(int64_t n, int num_workers, int batch_size);

// Example index i (0 <= i < b) of worker w's batch t in an epoch whose
// permutation is `perm`.
inline int64_t BatchExample(const std::vector<int64_t>& perm, int num_workers, int worker_id,
                            int batch_size, int64_t step, int i) {
  return perm[(step * batch_size + i) * num_workers + worker_id];
}

}  // namespace ps

#endif  // PS_WORKER_MLP_DATA_ORDER_H_
