// Transitional forwarding header: the optimizer moved to common/optimizer.h
// (target //common:optimizer) so that the worker's standalone store can use
// it without depending on server/. Only tests/ps_bench_main.cc still
// includes this file; delete it (and //server:optimizer) once that file
// moves to tools/ and includes common/optimizer.h, passing the step.
#ifndef PS_SERVER_OPTIMIZER_H_
#define PS_SERVER_OPTIMIZER_H_

#include <cstddef>

#include "absl/types/span.h"
#include "common/optimizer.h"

namespace ps {

// The pre-move form without a step: ApplyMeanInParallel(optimizer, 1, ...).
inline void ApplyMeanInParallel(Optimizer* optimizer, absl::Span<const float* const> grads,
                                size_t n, float* weights) {
  ApplyMeanInParallel(optimizer, /*step=*/1, grads, n, weights);
}

}  // namespace ps

#endif  // PS_SERVER_OPTIMIZER_H_
