// TableSpec: an embedding table as a model declares it.
//
// A table is a name, a row width (`dim` floats) and a key space of 64-bit
// ids. Rows are created on first touch, with values drawn from (seed, id)
// by InitRow (common/embedding_shard.h), so any shard and any restart
// creates the same row; they live on the shard ShardOfId picks. How many
// rows a server keeps, whether it evicts, and the sparse optimizer are the
// servers' settings (server/core/sparse_tables.h), not the model's.
//
// A plain value type; rpc/wire.h translates it to and from
// ps::v1::TableSpec. Thread-compatible.
#ifndef PS_COMMON_TABLE_SPEC_H_
#define PS_COMMON_TABLE_SPEC_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace ps {

struct TableSpec {
  std::string name;
  int dim = 0;
  uint64_t seed = 0;
  float init_scale = 0.01f;  // new rows are uniform in [-init_scale, init_scale)

  bool operator==(const TableSpec& o) const {
    return name == o.name && dim == o.dim && seed == o.seed && init_scale == o.init_scale;
  }
  bool operator!=(const TableSpec& o) const { return !(*this == o); }
};

// "name[dim=16,seed=7,init_scale=0.01]".
std::string TableSpecToString(const TableSpec& t);

// What a model's tables from the network may ask for.
struct TableLimits {
  int max_tables = 1024;
  int max_name_bytes = 256;
  int max_dim = 65536;  // server/checkpoint/checkpoint.h's kMaxCheckpointEmbeddingDim
};

// Names non-empty, unique and within max_name_bytes, 1 <= dim <= max_dim,
// 0 <= init_scale <= 3e38, at most max_tables tables. INVALID_ARGUMENT
// naming the table and the rule otherwise.
absl::Status ValidateTableSpecs(const std::vector<TableSpec>& tables,
                                const TableLimits& limits = TableLimits());

// OK if equal (same tables, same order); otherwise FAILED_PRECONDITION
// naming the first difference.
absl::Status CompareTableSpecs(const std::vector<TableSpec>& expected,
                               const std::vector<TableSpec>& got);

}  // namespace ps

#endif  // PS_COMMON_TABLE_SPEC_H_
