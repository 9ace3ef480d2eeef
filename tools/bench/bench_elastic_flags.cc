// ps_bench elastic's own flags (bench_elastic.h); the shared ones are in
// bench_flags.h.
#include "absl/flags/flag.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_elastic.h"
#include "tools/bench/bench_flags.h"

ABSL_FLAG(int, elastic_shards, 2, "elastic: ps_server processes.");
ABSL_FLAG(int, elastic_base_workers, 1, "elastic: workers that train throughout.");
ABSL_FLAG(int, elastic_joining_workers, 1, "elastic: workers that join, then leave.");
ABSL_FLAG(double, elastic_window, 5,
          "elastic: seconds of the steady window; each event is watched for twice this.");
ABSL_FLAG(int, elastic_batch_size, 64, "elastic: each worker's batch size.");
ABSL_FLAG(int, elastic_threads, 1, "elastic: each ps_worker's --threads.");

namespace ps {

absl::StatusOr<ElasticBenchOptions> ElasticBenchOptionsFromFlags() {
  ElasticBenchOptions o;
  ASSIGN_OR_RETURN(o.server_binary, ServerBinaryFromFlags());
  ASSIGN_OR_RETURN(o.worker_binary, WorkerBinaryFromFlags());
  o.num_shards = absl::GetFlag(FLAGS_elastic_shards);
  o.base_workers = absl::GetFlag(FLAGS_elastic_base_workers);
  o.joining_workers = absl::GetFlag(FLAGS_elastic_joining_workers);
  ASSIGN_OR_RETURN(o.window,
                   SecondsFromFlag("elastic_window", absl::GetFlag(FLAGS_elastic_window)));
  o.batch_size = absl::GetFlag(FLAGS_elastic_batch_size);
  o.threads = absl::GetFlag(FLAGS_elastic_threads);
  o.dataset_dir = absl::GetFlag(FLAGS_dataset_dir);
  RETURN_IF_ERROR(o.Validate());
  return o;
}

}  // namespace ps
