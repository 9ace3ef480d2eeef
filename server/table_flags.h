// ps_server's embedding-table flags (--max_rows, --evict_lru,
// --sparse_optimizer and its hyperparameters, --max_ids_per_request,
// --table_memory_budget and --table_dir, --table_admission and
// --admission_bloom_bytes, --table_ttl_steps, --table_ttl_secs and
// --table_evict_l2_below),
// defined here once, and SparseTablesOptionsFromFlags, which turns them
// into server/core/sparse_tables.h's SparseTablesOptions. What the values may
// be is checked by SparseTablesOptions::Validate (in Shard::Create).
#ifndef PS_SERVER_TABLE_FLAGS_H_
#define PS_SERVER_TABLE_FLAGS_H_

#include "absl/status/statusor.h"
#include "server/core/sparse_tables.h"

namespace ps {

// The flags' values (after absl::ParseCommandLine). INVALID_ARGUMENT for
// an unknown --sparse_optimizer, a --table_admission that does not parse
// (or names a table twice), and for --table_memory_budget without
// --table_dir or the reverse; FAILED_PRECONDITION naming --table_dir when
// it cannot be made.
absl::StatusOr<SparseTablesOptions> SparseTablesOptionsFromFlags();

}  // namespace ps

#endif  // PS_SERVER_TABLE_FLAGS_H_
