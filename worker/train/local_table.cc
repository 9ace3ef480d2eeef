#include "worker/train/local_table.h"

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"

namespace ps {

absl::Status LocalEmbeddingTableOptions::Validate() const {
  if (dim < 1) return absl::InvalidArgumentError(absl::StrCat("dim: ", dim, " is not >= 1"));
  if (!(init_scale >= 0) || !std::isfinite(init_scale)) {
    return absl::InvalidArgumentError(
        absl::StrCat("init_scale: ", init_scale, " is not finite and >= 0"));
  }
  return optimizer.Validate();
}

absl::StatusOr<LocalEmbeddingTable> LocalEmbeddingTable::Create(
    const LocalEmbeddingTableOptions& options) {
  absl::Status valid = options.Validate();
  if (!valid.ok()) return valid;
  return LocalEmbeddingTable(options);
}

LocalEmbeddingTable::LocalEmbeddingTable(const LocalEmbeddingTableOptions& options)
    : options_(options), state_floats_(options.optimizer.StateFloatsPerElement() * options.dim) {}

size_t LocalEmbeddingTable::RowOf(uint64_t id) {
  auto [it, inserted] = index_.try_emplace(id, index_.size());
  if (inserted) {
    const int dim = options_.dim;
    values_.resize(values_.size() + dim);
    InitRow(options_.seed, id, dim, options_.init_scale, &values_[values_.size() - dim]);
    state_.resize(state_.size() + state_floats_);
    InitSparseState(options_.optimizer, dim, &state_[state_.size() - state_floats_]);
    steps_.push_back(0);
  }
  return it->second;
}

void LocalEmbeddingTable::Lookup(absl::Span<const uint64_t> ids, bool create, float* rows) {
  const int dim = options_.dim;
  for (size_t i = 0; i < ids.size(); ++i) {
    float* out = rows + i * dim;
    if (create) {
      const float* row = &values_[RowOf(ids[i]) * dim];
      std::copy(row, row + dim, out);
      continue;
    }
    auto it = index_.find(ids[i]);
    if (it == index_.end()) {
      InitRow(options_.seed, ids[i], dim, options_.init_scale, out);
    } else {
      const float* row = &values_[it->second * dim];
      std::copy(row, row + dim, out);
    }
  }
}

void LocalEmbeddingTable::Apply(absl::Span<const uint64_t> ids, absl::Span<const float> grads) {
  const int dim = options_.dim;
  for (size_t i = 0; i < ids.size(); ++i) {
    const size_t r = RowOf(ids[i]);
    ApplySparseRow(options_.optimizer, dim, &grads[i * dim], &values_[r * dim],
                   state_.data() + r * state_floats_, &steps_[r]);
  }
}

}  // namespace ps
