#include "server/table_flags.h"

#include <cstdint>
#include <string>

#include "absl/flags/flag.h"
#include "common/status_macros.h"

ABSL_FLAG(int64_t, max_rows, 0,
          "Embedding tables: most rows one table keeps on this shard. A pull or push that "
          "would create more fails with RESOURCE_EXHAUSTED naming the table, unless "
          "--evict_lru. 0 = no bound (but memory).");
ABSL_FLAG(bool, evict_lru, false,
          "Embedding tables: at --max_rows, a new row replaces the least recently used one "
          "(its values and optimizer state are lost; it comes back as a new row) instead of "
          "failing.");
ABSL_FLAG(std::string, sparse_optimizer, "adagrad",
          "Embedding tables: the per-row update rule, applied to the rows a push touches "
          "only: sgd, adagrad (per-element accumulator), adam (lazy: a row's step count "
          "advances only when it is updated; betas 0.9, 0.999, eps 1e-8) or ftrl "
          "(FTRL-Proximal, --ftrl_*). See docs/embeddings.md.");
ABSL_FLAG(double, sparse_lr, 0.05, "Embedding tables: the learning rate (FTRL's alpha), > 0.");
ABSL_FLAG(double, sparse_initial_accumulator, 0.1,
          "Embedding tables, --sparse_optimizer=adagrad: a new row's accumulator (>= 0).");
ABSL_FLAG(double, ftrl_l1, 0, "Embedding tables, --sparse_optimizer=ftrl: L1 strength (>= 0).");
ABSL_FLAG(double, ftrl_l2, 0, "Embedding tables, --sparse_optimizer=ftrl: L2 strength (>= 0).");
ABSL_FLAG(double, ftrl_beta, 1, "Embedding tables, --sparse_optimizer=ftrl: beta (>= 0).");
ABSL_FLAG(int64_t, max_ids_per_request, int64_t{1} << 20,
          "Embedding tables: most ids one PullRows or PushRows may name (INVALID_ARGUMENT "
          "past it).");

namespace ps {

absl::StatusOr<SparseTablesOptions> SparseTablesOptionsFromFlags() {
  SparseTablesOptions o;
  o.max_rows = absl::GetFlag(FLAGS_max_rows);
  o.evict_lru = absl::GetFlag(FLAGS_evict_lru);
  ASSIGN_OR_RETURN(o.optimizer.kind,
                   ParseSparseOptimizerKind(absl::GetFlag(FLAGS_sparse_optimizer)));
  o.optimizer.lr = static_cast<float>(absl::GetFlag(FLAGS_sparse_lr));
  o.optimizer.adagrad_initial_accumulator =
      static_cast<float>(absl::GetFlag(FLAGS_sparse_initial_accumulator));
  o.optimizer.ftrl_l1 = static_cast<float>(absl::GetFlag(FLAGS_ftrl_l1));
  o.optimizer.ftrl_l2 = static_cast<float>(absl::GetFlag(FLAGS_ftrl_l2));
  o.optimizer.ftrl_beta = static_cast<float>(absl::GetFlag(FLAGS_ftrl_beta));
  o.max_ids_per_request = absl::GetFlag(FLAGS_max_ids_per_request);
  return o;
}

}  // namespace ps
