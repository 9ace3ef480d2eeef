#include "worker/ctr/flags.h"

#include <cmath>
#include <cstdint>
#include <string>
#include <utility>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"

ABSL_FLAG(int, ctr_dim, 16, "--model=ctr: floats per embedding row.");
ABSL_FLAG(std::string, ctr_hidden, "64,32",
          "--model=ctr: hidden layer widths of the MLP over the embeddings and dense "
          "features, comma-separated.");
ABSL_FLAG(uint64_t, ctr_vocab, 1000000,
          "--model=ctr, synthetic data: ids per categorical feature (26 features).");
ABSL_FLAG(uint64_t, ctr_signal_vocab, 1000,
          "--model=ctr, synthetic data: only this many most frequent ids of each feature "
          "carry weight in the hidden model (0: every id; worker/ctr/data.h).");
ABSL_FLAG(int64_t, ctr_examples, 1000000,
          "--model=ctr, synthetic data: training examples [0, N); the held-out ones follow. "
          "Without --max_steps a run is --epochs passes over them.");
ABSL_FLAG(uint64_t, ctr_seed, 1,
          "--model=ctr: seed of the synthetic generator and of the embedding rows' initial "
          "values (same on all workers).");
ABSL_FLAG(int, ctr_eval_examples, 20000,
          "--model=ctr: held-out examples worker 0 evaluates AUC and log loss on (synthetic: "
          "those after --ctr_examples; a file: its last ones).");
ABSL_FLAG(bool, ctr_prefetch_rows, false,
          "--model=ctr: name each next batch's ids to the servers as a step pulls its rows "
          "(PullRowsRequest.prefetch), so that servers with --table_memory_budget read them "
          "back from disk while this worker computes. Changes no result.");
ABSL_FLAG(std::string, ctr_data, "",
          "--model=ctr: train on this file instead of the synthetic generator (its last "
          "--ctr_eval_examples examples held out); format from --ctr_format.");
ABSL_FLAG(std::string, ctr_format, "criteo",
          "--model=ctr with --ctr_data: criteo (Criteo's TSV: label, 13 integers, 26 hex "
          "tokens) or libsvm (label id:value ...; every pair categorical).");
ABSL_FLAG(double, ctr_dense_lr, 1e-3,
          "--model=ctr --standalone: the Adam learning rate of the MLP (the servers use their "
          "own --optimizer and --lr).");
ABSL_FLAG(double, ctr_sparse_lr, 0.05,
          "--model=ctr --standalone: the AdaGrad learning rate of the embedding rows (the "
          "servers use their own --sparse_optimizer and --sparse_lr).");

namespace ps {

absl::StatusOr<CtrOptions> CtrOptionsFromFlags(const SharedWorkloadFlags& shared, int threads) {
  CtrOptions o;
  o.worker_id = shared.worker_id;
  o.num_workers = shared.num_workers;
  o.batch_size = shared.batch_size;
  o.steps = shared.max_steps;
  o.epochs = shared.epochs;
  o.threads = threads;
  o.model.seed = shared.seed;
  o.model.dim = absl::GetFlag(FLAGS_ctr_dim);
  ASSIGN_OR_RETURN(o.model.hidden,
                   ParsePositiveIntList("ctr_hidden", absl::GetFlag(FLAGS_ctr_hidden)));
  o.data.seed = absl::GetFlag(FLAGS_ctr_seed);
  o.table_seed = o.data.seed;
  o.data.vocab_sizes = {absl::GetFlag(FLAGS_ctr_vocab)};
  o.data.signal_vocab_size = absl::GetFlag(FLAGS_ctr_signal_vocab);
  o.data.num_examples = absl::GetFlag(FLAGS_ctr_examples);
  o.eval_examples = absl::GetFlag(FLAGS_ctr_eval_examples);
  o.prefetch_rows = absl::GetFlag(FLAGS_ctr_prefetch_rows);
  o.data_file = absl::GetFlag(FLAGS_ctr_data);
  const std::string format = absl::GetFlag(FLAGS_ctr_format);
  if (format == "criteo") {
    o.reader.format = CtrFormat::kCriteoTsv;
  } else if (format == "libsvm") {
    o.reader.format = CtrFormat::kLibsvm;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --ctr_format '", format, "' (known: criteo, libsvm)"));
  }
  RETURN_IF_ERROR(o.Validate());
  return o;
}

absl::StatusOr<LocalStoreOptions> CtrStandaloneStoreFromFlags() {
  const double dense = absl::GetFlag(FLAGS_ctr_dense_lr);
  const double sparse = absl::GetFlag(FLAGS_ctr_sparse_lr);
  if (!(dense > 0 && std::isfinite(dense))) {
    return absl::InvalidArgumentError(absl::StrCat("--ctr_dense_lr must be > 0, got ", dense));
  }
  if (!(sparse > 0 && sparse < 1e30)) {
    return absl::InvalidArgumentError(absl::StrCat("--ctr_sparse_lr must be > 0, got ", sparse));
  }
  return CtrStandaloneStore(dense, static_cast<float>(sparse));
}

absl::StatusOr<std::unique_ptr<Workload>> CtrWorkloadFromFlags(const SharedWorkloadFlags& shared,
                                                               int threads) {
  ASSIGN_OR_RETURN(const CtrOptions options, CtrOptionsFromFlags(shared, threads));
  ASSIGN_OR_RETURN(std::unique_ptr<CtrWorkload> w, CtrWorkload::Create(options));
  return std::unique_ptr<Workload>(std::move(w));
}

}  // namespace ps
