// ps_bench apply's own flag (bench_apply.h); the shared ones are in
// bench_flags.h.
#include "absl/flags/flag.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_apply.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(std::string, apply_elements, "1048576,16777216",
          "apply: shard sizes in float32 elements.");

namespace ps {

absl::StatusOr<ApplyBenchOptions> ApplyBenchOptionsFromFlags() {
  ApplyBenchOptions o;
  o.elements = absl::GetFlag(FLAGS_apply_elements);
  ASSIGN_OR_RETURN(o.duration, SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  return o;
}

}  // namespace ps
