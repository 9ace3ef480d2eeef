// ps_bench sparse's own flags (bench_sparse.h); the shared ones are in
// bench_flags.h.
#include "absl/flags/flag.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_sparse.h"

ABSL_FLAG(std::string, sparse_ids, "1000,10000,100000",
          "sparse: ids per request (each size is a cluster of its own).");
ABSL_FLAG(std::string, dims, "16,64", "sparse: row dims of the table.");
ABSL_FLAG(std::string, dists, "uniform,zipf",
          "sparse: id distributions: uniform over --vocab, zipf (s = 1.1) over --vocab.");
ABSL_FLAG(int, sparse_shards, 2, "sparse: number of in-process server shards.");
ABSL_FLAG(int64_t, vocab, 1000000, "sparse: ids are drawn from [0, vocab).");

namespace ps {

absl::StatusOr<SparseBenchOptions> SparseBenchOptionsFromFlags() {
  SparseBenchOptions o;
  o.ids = absl::GetFlag(FLAGS_sparse_ids);
  o.dims = absl::GetFlag(FLAGS_dims);
  o.dists = absl::GetFlag(FLAGS_dists);
  o.ops = absl::GetFlag(FLAGS_ops);
  o.shards = absl::GetFlag(FLAGS_sparse_shards);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  ASSIGN_OR_RETURN(o.duration, SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  return o;
}

}  // namespace ps
