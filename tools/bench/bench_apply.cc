#include "tools/bench/bench_apply.h"

#include <functional>

#include "absl/strings/str_cat.h"
#include "common/optimizer.h"

namespace ps {
namespace {

// The baseline: y += a * x, the same bytes as an SGD apply.
__attribute__((noinline)) void Axpy(float a, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunApplyBench(const ApplyBenchOptions& o) {
  auto sizes = ParseNonEmptyList(o.elements, "apply_elements");
  if (!sizes.ok()) return sizes.status();
  const absl::Duration duration = o.duration;
  std::vector<Row> rows;
  for (int64_t n : *sizes) {
    std::vector<float> g(n, 1e-3f), w(n, 1.0f);
    auto opt = CreateOptimizer(OptimizerOptions{"sgd", 1e-3f}, n);
    if (!opt.ok()) return opt.status();
    // Rate of `f` in GB/s, counting 12 bytes per element: two reads, one write.
    auto rate = [&](const std::function<void()>& f) {
      f();  // warm up: page in
      int64_t reps = 0;
      const absl::Time start = absl::Now();
      absl::Time now = start;
      while (now - start < duration || reps < 3) {
        f();
        ++reps;
        now = absl::Now();
      }
      return 12.0 * n * reps / absl::ToDoubleSeconds(now - start) / 1e9;
    };
    const double axpy = rate([&] { Axpy(-1e-3f, g.data(), w.data(), n); });
    Row r;
    r.name = absl::StrCat((*opt)->name(), "_apply");  // the optimizer on one thread
    r.bytes = n;
    r.baseline = axpy;
    r.value = rate([&] { (*opt)->ApplyMean(/*step=*/1, 1.0, {g.data()}, 0, n, w.data()); });
    rows.push_back(r);
    r.name = absl::StrCat((*opt)->name(), "_shard");  // as a shard applies: split over cores
    r.value = rate([&] { ApplyMeanInParallel(opt->get(), /*step=*/1, 1.0, {g.data()}, n, w.data()); });
    rows.push_back(r);
  }
  return rows;
}

}  // namespace ps
