#include "worker/mlp/data_order.h"

#include <numeric>
#include <random>

namespace ps {

std::vector<int64_t> EpochPermutation(int64_t n, uint64_t seed, int epoch, bool shuffle) {
  std::vector<int64_t> perm(n);
  std::iota(perm.begin(), perm.end(), 0);
  if (!shuffle) return perm;
  // Our own Fisher-Yates: std::shuffle's algorithm is not specified, and
  // workers built by different compilers must agree.
  std::mt19937_64 rng(seed * 0x9E3779B97F4A7C15ULL + static_cast<uint64_t>(epoch) + 1);
  for (int64_t i = n - 1; i > 0; --i) {
    const int64_t j = static_cast<int64_t>(rng() % static_cast<uint64_t>(i + 1));
    std::swap(perm[i], perm[j]);
  }
  return perm;
}

int64_t StepsPerEpoch(int64_t n, int num_workers, int batch_size) {
  return (n / num_workers) / batch_size;
}

}  // namespace ps
