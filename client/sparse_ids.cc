#include "client/sparse_ids.h"

#include <algorithm>
#include <cstring>
#include <functional>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"
#include "common/status_macros.h"

namespace ps {

absl::StatusOr<int64_t> SparseValueCount(size_t num_ids, int dim) {
  if (dim <= 0) {
    return absl::InvalidArgumentError(absl::StrCat("sparse ids: dim must be >= 1, got ", dim));
  }
  constexpr uint64_t kMaxFloats = std::numeric_limits<int64_t>::max() / sizeof(float);
  if (static_cast<uint64_t>(num_ids) > kMaxFloats / static_cast<uint64_t>(dim)) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse ids: ", num_ids, " ids of dim ", dim,
                     " take more bytes than an int64 counts (at most ", kMaxFloats, " floats)"));
  }
  return static_cast<int64_t>(num_ids) * dim;
}

namespace {

using IdAt = std::pair<uint64_t, size_t>;  // (id, caller position)

// Sorts `order` by id, keeping positions ascending within an id: std::sort
// for short lists, else a stable LSD radix sort on 11-bit digits that skips
// the digits no two ids differ in (ids below 2^22 take two passes).
void SortById(std::vector<IdAt>* order) {
  constexpr size_t kRadixFrom = 2048;
  if (order->size() < kRadixFrom) {
    std::sort(order->begin(), order->end());
    return;
  }
  constexpr int kBits = 11;
  constexpr size_t kBuckets = size_t{1} << kBits;
  uint64_t any = 0, all = ~uint64_t{0};
  for (const IdAt& p : *order) {
    any |= p.first;
    all &= p.first;
  }
  const uint64_t varying = any ^ all;
  std::vector<IdAt> scratch(order->size());
  std::vector<size_t> start(kBuckets);
  for (int shift = 0; shift < 64; shift += kBits) {
    if (((varying >> shift) & (kBuckets - 1)) == 0) continue;
    std::fill(start.begin(), start.end(), 0);
    for (const IdAt& p : *order) ++start[(p.first >> shift) & (kBuckets - 1)];
    size_t sum = 0;
    for (size_t& s : start) sum += std::exchange(s, sum);
    for (const IdAt& p : *order) scratch[start[(p.first >> shift) & (kBuckets - 1)]++] = p;
    order->swap(scratch);
  }
}

}  // namespace

absl::StatusOr<SparseRequest> GroupIds(absl::Span<const uint64_t> ids, int num_shards) {
  if (num_shards <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("sparse ids: num_shards must be >= 1, got ", num_shards));
  }
  SparseRequest request;
  request.shard_ids.resize(num_shards);
  request.slots.resize(ids.size());

  // Ids already strictly ascending (sorted and distinct, as trainers that
  // dedup their batch send them): each shard's list is a subsequence, in
  // order, with no sort.
  if (std::adjacent_find(ids.begin(), ids.end(), std::greater_equal<uint64_t>()) == ids.end()) {
    if (num_shards == 1) {
      request.shard_ids[0].assign(ids.begin(), ids.end());
      for (size_t i = 0; i < ids.size(); ++i) {
        request.slots[i] = SparseRequest::Slot{0, static_cast<int64_t>(i)};
      }
      request.identity = true;
      return request;
    }
    for (auto& list : request.shard_ids) list.reserve(ids.size() / num_shards + 16);
    for (size_t i = 0; i < ids.size(); ++i) {
      const int shard = ShardOfId(ids[i], num_shards);
      std::vector<uint64_t>& list = request.shard_ids[shard];
      request.slots[i] = SparseRequest::Slot{shard, static_cast<int64_t>(list.size())};
      list.push_back(ids[i]);
    }
    return request;
  }

  // (id, caller position), sorted: each id's positions form one run, and the
  // runs come in ascending id order, so appending each run's id to its
  // shard's list keeps every list ascending.
  std::vector<IdAt> order(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) order[i] = {ids[i], i};
  SortById(&order);

  for (size_t run = 0; run < order.size();) {
    const uint64_t id = order[run].first;
    const int shard = ShardOfId(id, num_shards);
    std::vector<uint64_t>& list = request.shard_ids[shard];
    const int64_t index = static_cast<int64_t>(list.size());
    list.push_back(id);
    for (; run < order.size() && order[run].first == id; ++run) {
      request.slots[order[run].second] = SparseRequest::Slot{shard, index};
    }
  }
  return request;
}

absl::Status ScatterRows(const SparseRequest& request,
                         absl::Span<const absl::Span<const float>> shard_rows, int dim,
                         float* out) {
  RETURN_IF_ERROR(SparseValueCount(request.num_ids(), dim).status());
  if (shard_rows.size() != request.shard_ids.size()) {
    return absl::InvalidArgumentError(absl::StrCat("sparse ids: rows for ", shard_rows.size(),
                                                   " shards, the request has ",
                                                   request.shard_ids.size()));
  }
  for (size_t s = 0; s < shard_rows.size(); ++s) {
    // Fits: a shard's unique ids are no more than the request's ids.
    const uint64_t want = static_cast<uint64_t>(request.shard_ids[s].size()) * dim;
    if (shard_rows[s].size() != want) {
      return absl::InvalidArgumentError(absl::StrCat(
          "sparse ids: shard ", s, " sent ", shard_rows[s].size(), " floats, expected ", want, " (",
          request.shard_ids[s].size(), " ids of dim ", dim, ")"));
    }
  }
  const size_t row_bytes = static_cast<size_t>(dim) * sizeof(float);
  if (request.identity && !request.slots.empty()) {
    std::memcpy(out, shard_rows[0].data(), request.slots.size() * row_bytes);
    return absl::OkStatus();
  }
  for (size_t i = 0; i < request.slots.size(); ++i) {
    const SparseRequest::Slot& slot = request.slots[i];
    std::memcpy(out + i * dim, shard_rows[slot.shard].data() + slot.index * dim, row_bytes);
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<std::vector<float>>> SumGradients(const SparseRequest& request,
                                                             const float* grads, int dim) {
  RETURN_IF_ERROR(SparseValueCount(request.num_ids(), dim).status());
  std::vector<std::vector<float>> sums(request.shard_ids.size());
  if (request.identity) {
    sums[0].assign(grads, grads + request.slots.size() * static_cast<size_t>(dim));
    return sums;
  }
  // seen[s][k]: unique id k of shard s already has its first row.
  std::vector<std::vector<bool>> seen(request.shard_ids.size());
  for (size_t s = 0; s < sums.size(); ++s) {
    sums[s].resize(request.shard_ids[s].size() * static_cast<size_t>(dim));
    seen[s].resize(request.shard_ids[s].size());
  }
  // Caller order, so each sum adds its rows first occurrence first.
  for (size_t i = 0; i < request.slots.size(); ++i) {
    const SparseRequest::Slot& slot = request.slots[i];
    const float* src = grads + i * dim;
    float* dst = sums[slot.shard].data() + slot.index * dim;
    if (!seen[slot.shard][slot.index]) {
      seen[slot.shard][slot.index] = true;
      std::memcpy(dst, src, static_cast<size_t>(dim) * sizeof(float));
    } else {
      for (int j = 0; j < dim; ++j) dst[j] += src[j];
    }
  }
  return sums;
}

absl::StatusOr<ShardGradients> GradientsByShard(const SparseRequest& request, const float* grads,
                                                int dim, bool borrow) {
  ShardGradients g;
  if (borrow && request.identity) {
    RETURN_IF_ERROR(SparseValueCount(request.num_ids(), dim).status());
    g.views.emplace_back(grads, request.num_ids() * static_cast<size_t>(dim));
    return g;
  }
  ASSIGN_OR_RETURN(g.sums, SumGradients(request, grads, dim));
  g.views.assign(g.sums.begin(), g.sums.end());
  return g;
}

RowsLanding::RowsLanding(const SparseRequest& request, int dim, absl::Span<float> out)
    : request_(request), dim_(dim), out_(out) {
  if (request.identity) {
    shards_.push_back(out);
    return;
  }
  for (const std::vector<uint64_t>& ids : request.shard_ids) {
    const size_t n = ids.size() * static_cast<size_t>(dim);
    buffers_.emplace_back(new float[n]);
    shards_.emplace_back(buffers_.back().get(), n);
  }
}

absl::Status RowsLanding::Scatter() const {
  if (request_.identity) return absl::OkStatus();
  std::vector<absl::Span<const float>> views(shards_.begin(), shards_.end());
  return ScatterRows(request_, views, dim_, out_.data());
}

}  // namespace ps
