// Sparse ids: how a pull or push of embedding rows by id is split over the
// servers, and how its rows and gradients are put back together.
//
// A caller asks for the rows of a list of ids, in any order and with
// repeats. GroupIds sends each id once to the shard that owns it
// (ShardOfId, common/embedding_shard.h): per shard the unique ids in
// ascending order, so a request is canonical (the same set of ids gives
// the same request whatever the caller's order) and a server can
// binary-search or merge it against its rows. It also records, for every
// caller position, which shard and which entry of that shard's list it
// maps to. ScatterRows copies the servers' answers back into the caller's
// order (a repeated id gets a copy of its row in each position);
// SumGradients folds the caller's gradients into one row per unique id,
// adding the rows of a repeated id in caller order: the first occurrence's
// row, plus the second's, plus the third's ..., so the sums are the same
// bit for bit on every run.
//
// Sizes: `dim` is the row width in floats, >= 1; a request of n ids holds
// n * dim values, which must fit an int64 count of bytes
// (SparseValueCount). Rows that come back from servers are checked against
// the request and a wrong size is an error naming the shard, never a crash.
//
// Pure functions over values the caller owns; thread-safe. O(n log n) in
// the number of ids (one sort), O(n * dim) in the values.
#ifndef PS_CLIENT_SPARSE_IDS_H_
#define PS_CLIENT_SPARSE_IDS_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"

namespace ps {

// One pull or push by id, grouped per shard.
struct SparseRequest {
  // Where caller position i's row lives: shard_ids[shard][index].
  struct Slot {
    int shard = 0;
    int64_t index = 0;
  };

  // shard_ids[s]: the unique ids shard s is asked for, ascending (strictly).
  // One entry per shard, possibly empty.
  std::vector<std::vector<uint64_t>> shard_ids;
  // slots[i]: caller position i; one entry per id the caller gave.
  std::vector<Slot> slots;
  // One shard and slots[i] == {0, i}: the caller's ids were strictly
  // ascending, so its order is the shard's and rows move in one copy.
  bool identity = false;

  int num_shards() const { return static_cast<int>(shard_ids.size()); }
  size_t num_ids() const { return slots.size(); }
};

// num_ids * dim, the number of floats a request's rows take in caller order;
// INVALID_ARGUMENT when dim <= 0 or the bytes they take do not fit an int64.
absl::StatusOr<int64_t> SparseValueCount(size_t num_ids, int dim);

// Groups `ids` (any order, repeats allowed, possibly empty) per owning shard
// out of `num_shards`. INVALID_ARGUMENT when num_shards <= 0.
absl::StatusOr<SparseRequest> GroupIds(absl::Span<const uint64_t> ids, int num_shards);

// Writes the rows in the caller's order: out[i * dim, (i + 1) * dim) is
// caller position i's row. shard_rows[s] holds shard s's rows, one per id of
// request.shard_ids[s] and in that order, dim floats each. INVALID_ARGUMENT,
// naming the shard, when shard_rows does not have one entry per shard or an
// entry has the wrong size; also when dim is bad (SparseValueCount). Nothing
// is written unless every size is right.
// REQUIRES: out holds request.num_ids() * dim floats (may be null when 0).
absl::Status ScatterRows(const SparseRequest& request,
                         absl::Span<const absl::Span<const float>> shard_rows, int dim,
                         float* out);

// Per shard, the gradient of each of its unique ids (request.shard_ids[s]'s
// order, dim floats each): the sum of that id's rows of `grads` in caller
// order, starting from the first occurrence's row (not from zero, so a lone
// -0.0 stays -0.0). `grads` holds request.num_ids() rows of dim floats, in
// caller order. INVALID_ARGUMENT when dim is bad (SparseValueCount).
// REQUIRES: grads holds request.num_ids() * dim floats (may be null when 0);
// `request` came from GroupIds.
absl::StatusOr<std::vector<std::vector<float>>> SumGradients(const SparseRequest& request,
                                                             const float* grads, int dim);

// A request's gradients as the transports send them: views[s] is shard s's,
// SumGradients' rows. With `borrow`, an identity request's view is the
// caller's `grads` itself (no copy; they must outlive the views); otherwise
// (and always for any other request) `sums` holds them.
// Move-only: a copy's views would point into the original's sums.
struct ShardGradients {
  ShardGradients() = default;
  ShardGradients(ShardGradients&&) = default;
  ShardGradients& operator=(ShardGradients&&) = default;
  ShardGradients(const ShardGradients&) = delete;
  ShardGradients& operator=(const ShardGradients&) = delete;

  std::vector<std::vector<float>> sums;
  std::vector<absl::Span<const float>> views;
};
absl::StatusOr<ShardGradients> GradientsByShard(const SparseRequest& request, const float* grads,
                                                int dim, bool borrow);

// Where a request's rows arrive: shards()[s] holds shard s's rows,
// request.shard_ids[s].size() * dim floats. An identity request's land in
// the caller's `out` itself; any other's in buffers of this object (not
// zeroed: a transport fills each whole or fails), which Scatter then
// copies into `out` in caller order. Not copyable: the views point into it.
// REQUIRES: `request` (from GroupIds) and `out` (request.num_ids() * dim
// floats) outlive it; dim >= 1 and SparseValueCount passed.
class RowsLanding {
 public:
  RowsLanding(const SparseRequest& request, int dim, absl::Span<float> out);
  RowsLanding(const RowsLanding&) = delete;
  RowsLanding& operator=(const RowsLanding&) = delete;

  const std::vector<absl::Span<float>>& shards() const { return shards_; }
  // After every shard's rows arrived: `out` in caller order (ScatterRows'
  // errors, which the sizes rule out).
  absl::Status Scatter() const;

 private:
  const SparseRequest& request_;
  const int dim_;
  const absl::Span<float> out_;
  std::vector<std::unique_ptr<float[]>> buffers_;
  std::vector<absl::Span<float>> shards_;
};

}  // namespace ps

#endif  // PS_CLIENT_SPARSE_IDS_H_
