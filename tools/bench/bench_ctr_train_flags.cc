// ps_bench train --model=ctr's own flags (bench_ctr_train.h); the shared
// ones are in bench_flags.h.
#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "tools/bench/bench_ctr_train.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(double, ctr_dense_lr, 1e-3, "train --model=ctr: Adam's learning rate for the MLP.");
ABSL_FLAG(int, ctr_batch, 128, "train --model=ctr: examples per step per worker.");
ABSL_FLAG(uint64_t, ctr_vocab, 1000000, "train --model=ctr: generator ids per feature.");
ABSL_FLAG(int, ctr_eval_examples, 10000, "train --model=ctr: held-out examples of worker 0's AUC.");
ABSL_FLAG(double, ctr_tier_ratio, 10,
          "train --model=ctr: also train with the embedding table this many times its memory "
          "budget (--table_memory_budget; the rest on disk in RocksDB), against the same run "
          "all in memory. 0 = skip.");

ABSL_FLAG(std::string, ctr_admission, "count:2",
          "train --model=ctr: also train with this feature admission (--table_admission's "
          "none, count:N or bloom:N; bloom with --admission_bloom_bytes), against the same run "
          "without: rows resident and AUC. none = skip.");
ABSL_FLAG(int64_t, ctr_admission_bloom_bytes, int64_t{1} << 22,
          "train --model=ctr, --ctr_admission=bloom:N: the filter's bytes.");

namespace ps {

absl::StatusOr<CtrTrainBenchOptions> CtrTrainBenchOptionsFromFlags() {
  CtrTrainBenchOptions o;
  if (absl::GetFlag(FLAGS_max_steps) > 0) o.steps = absl::GetFlag(FLAGS_max_steps);
  o.batch = absl::GetFlag(FLAGS_ctr_batch);
  o.vocab = absl::GetFlag(FLAGS_ctr_vocab);
  o.eval_examples = absl::GetFlag(FLAGS_ctr_eval_examples);
  o.dense_lr = absl::GetFlag(FLAGS_ctr_dense_lr);
  o.tier_ratio = absl::GetFlag(FLAGS_ctr_tier_ratio);
  if (!(o.tier_ratio == 0 || o.tier_ratio >= 1)) {
    return absl::InvalidArgumentError("--ctr_tier_ratio must be 0 or >= 1");
  }
  o.admission.bloom_bytes = absl::GetFlag(FLAGS_ctr_admission_bloom_bytes);
  if (absl::Status s = ParseAdmissionKind(absl::GetFlag(FLAGS_ctr_admission), &o.admission);
      !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--ctr_admission: ", s.message()));
  }
  o.print_workers = !absl::GetFlag(FLAGS_json);
  return o;
}

}  // namespace ps
