#include "client/sparse_ids.h"

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "common/embedding_shard.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

// n ids drawn from a pool of `pool` distinct values (so they repeat), some
// small, some with only high bits set. Deterministic.
std::vector<uint64_t> RandomIds(size_t n, size_t pool, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::vector<uint64_t> values(pool);
  for (size_t k = 0; k < pool; ++k) {
    values[k] = (k % 3 == 0) ? k : (k % 3 == 1) ? rng() : (rng() << 40);
  }
  std::vector<uint64_t> ids(n);
  for (size_t i = 0; i < n; ++i) ids[i] = values[rng() % pool];
  return ids;
}

// Row j of id `id` as the test's "server" holds it.
float RowValue(uint64_t id, int j) {
  return static_cast<float>(id % 1000003) + 0.25f * static_cast<float>(j);
}

std::vector<std::vector<float>> ServerRows(const SparseRequest& request, int dim) {
  std::vector<std::vector<float>> rows(request.shard_ids.size());
  for (size_t s = 0; s < rows.size(); ++s) {
    for (uint64_t id : request.shard_ids[s]) {
      for (int j = 0; j < dim; ++j) rows[s].push_back(RowValue(id, j));
    }
  }
  return rows;
}

std::vector<absl::Span<const float>> Spans(const std::vector<std::vector<float>>& rows) {
  return std::vector<absl::Span<const float>>(rows.begin(), rows.end());
}

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() && std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0;
}

TEST(GroupIds, MatchesNaiveReference) {
  for (int num_shards : {1, 3, 8}) {
    const std::vector<uint64_t> ids = RandomIds(5000, 700, /*seed=*/num_shards);
    absl::StatusOr<SparseRequest> request = GroupIds(ids, num_shards);
    ASSERT_TRUE(request.ok()) << request.status();

    // Naive: an ordered set of ids per shard.
    std::map<int, std::set<uint64_t>> naive;
    for (uint64_t id : ids) naive[ShardOfId(id, num_shards)].insert(id);
    ASSERT_EQ(request->num_shards(), num_shards);
    for (int s = 0; s < num_shards; ++s) {
      const std::set<uint64_t>& want = naive[s];
      EXPECT_EQ(request->shard_ids[s], std::vector<uint64_t>(want.begin(), want.end()))
          << "shard " << s;
    }
    ASSERT_EQ(request->num_ids(), ids.size());
    for (size_t i = 0; i < ids.size(); ++i) {
      const SparseRequest::Slot& slot = request->slots[i];
      ASSERT_GE(slot.shard, 0);
      ASSERT_LT(slot.shard, num_shards);
      ASSERT_GE(slot.index, 0);
      ASSERT_LT(slot.index, static_cast<int64_t>(request->shard_ids[slot.shard].size()));
      EXPECT_EQ(request->shard_ids[slot.shard][slot.index], ids[i]) << "position " << i;
    }
  }
}

// Strictly ascending ids take a path with no sort: the same request as the
// general path gives for the same ids with one pair swapped (which sorts
// them), and with one shard an identity that scatters and sums in one copy.
TEST(GroupIds, AscendingIdsGiveTheSameRequestWithoutSorting) {
  std::vector<uint64_t> ids = RandomIds(5000, 100000, /*seed=*/3);
  std::sort(ids.begin(), ids.end());
  ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
  std::vector<uint64_t> swapped = ids;
  std::swap(swapped[10], swapped[11]);
  for (int num_shards : {1, 4}) {
    absl::StatusOr<SparseRequest> fast = GroupIds(ids, num_shards);
    absl::StatusOr<SparseRequest> general = GroupIds(swapped, num_shards);
    ASSERT_TRUE(fast.ok() && general.ok());
    EXPECT_EQ(fast->shard_ids, general->shard_ids);
    EXPECT_EQ(fast->identity, num_shards == 1);
    EXPECT_FALSE(general->identity);
    for (size_t i = 0; i < ids.size(); ++i) {
      const SparseRequest::Slot& slot = fast->slots[i];
      ASSERT_EQ(fast->shard_ids[slot.shard][slot.index], ids[i]) << "position " << i;
    }
    const int dim = 3;
    const std::vector<std::vector<float>> rows = ServerRows(*fast, dim);
    std::vector<float> out(ids.size() * dim), want(ids.size() * dim);
    ASSERT_TRUE(ScatterRows(*fast, Spans(rows), dim, out.data()).ok());
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int j = 0; j < dim; ++j) want[i * dim + j] = RowValue(ids[i], j);
    }
    EXPECT_TRUE(SameBits(out, want));
    absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*fast, want.data(), dim);
    ASSERT_TRUE(sums.ok());
    for (int s = 0; s < num_shards; ++s) EXPECT_TRUE(SameBits((*sums)[s], rows[s])) << s;
  }
}

TEST(GroupIds, SendsEachIdOnceAscendingToItsOwningShard) {
  const int num_shards = 5;
  const std::vector<uint64_t> ids = RandomIds(3000, 400, /*seed=*/11);
  absl::StatusOr<SparseRequest> request = GroupIds(ids, num_shards);
  ASSERT_TRUE(request.ok()) << request.status();
  size_t sent = 0;
  for (int s = 0; s < num_shards; ++s) {
    const std::vector<uint64_t>& list = request->shard_ids[s];
    sent += list.size();
    for (size_t k = 0; k < list.size(); ++k) {
      EXPECT_EQ(ShardOfId(list[k], num_shards), s) << "id " << list[k];
      if (k > 0) EXPECT_LT(list[k - 1], list[k]) << "shard " << s << " entry " << k;
    }
  }
  EXPECT_EQ(sent, std::set<uint64_t>(ids.begin(), ids.end()).size());
}

TEST(GroupIds, IsCanonicalWhateverTheCallerOrder) {
  std::vector<uint64_t> ids = RandomIds(2000, 300, /*seed=*/5);
  absl::StatusOr<SparseRequest> a = GroupIds(ids, 4);
  std::shuffle(ids.begin(), ids.end(), std::mt19937_64(9));
  const std::vector<uint64_t> head(ids.begin(), ids.begin() + 100);
  ids.insert(ids.end(), head.begin(), head.end());  // more repeats
  absl::StatusOr<SparseRequest> b = GroupIds(ids, 4);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->shard_ids, b->shard_ids);
}

TEST(GroupIds, HandlesEmptyInput) {
  absl::StatusOr<SparseRequest> request = GroupIds({}, 3);
  ASSERT_TRUE(request.ok()) << request.status();
  EXPECT_EQ(request->num_shards(), 3);
  EXPECT_EQ(request->num_ids(), 0u);
  for (const auto& list : request->shard_ids) EXPECT_TRUE(list.empty());

  std::vector<std::vector<float>> no_rows(3);
  EXPECT_TRUE(ScatterRows(*request, Spans(no_rows), 4, nullptr).ok());
  absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*request, nullptr, 4);
  ASSERT_TRUE(sums.ok()) << sums.status();
  EXPECT_EQ(*sums, std::vector<std::vector<float>>(3));
}

TEST(GroupIds, RejectsNonPositiveShardCount) {
  const std::vector<uint64_t> ids = {1, 2, 3};
  for (int num_shards : {0, -1}) {
    absl::StatusOr<SparseRequest> request = GroupIds(ids, num_shards);
    ASSERT_FALSE(request.ok());
    EXPECT_EQ(request.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(request.status().message(), HasSubstr("num_shards"));
  }
}

TEST(SparseValueCount, RejectsBadDimAndOverflow) {
  EXPECT_EQ(*SparseValueCount(10, 3), 30);
  EXPECT_EQ(*SparseValueCount(0, 1), 0);
  for (int dim : {0, -4}) {
    absl::StatusOr<int64_t> count = SparseValueCount(10, dim);
    ASSERT_FALSE(count.ok());
    EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(count.status().message(), HasSubstr("dim"));
  }
  const size_t huge = size_t{1} << 62;
  absl::StatusOr<int64_t> count = SparseValueCount(huge, 2);
  ASSERT_FALSE(count.ok());
  EXPECT_EQ(count.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(count.status().message(), HasSubstr("int64"));
  // The largest that fits still does.
  const int64_t max_floats = std::numeric_limits<int64_t>::max() / sizeof(float);
  EXPECT_EQ(*SparseValueCount(static_cast<size_t>(max_floats), 1), max_floats);
  EXPECT_FALSE(SparseValueCount(static_cast<size_t>(max_floats) + 1, 1).ok());
}

TEST(ScatterRows, ReturnsRowsInCallerOrderWithRepeatsCopied) {
  const int dim = 3;
  const std::vector<uint64_t> ids = RandomIds(4000, 500, /*seed=*/21);
  absl::StatusOr<SparseRequest> request = GroupIds(ids, 6);
  ASSERT_TRUE(request.ok()) << request.status();
  const std::vector<std::vector<float>> rows = ServerRows(*request, dim);
  std::vector<float> out(ids.size() * dim, -1.0f);
  ASSERT_TRUE(ScatterRows(*request, Spans(rows), dim, out.data()).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    for (int j = 0; j < dim; ++j) {
      ASSERT_EQ(out[i * dim + j], RowValue(ids[i], j)) << "position " << i << " col " << j;
    }
  }
}

TEST(ScatterRows, RejectsRowsOfTheWrongSizeNamingTheShard) {
  const int dim = 2;
  const std::vector<uint64_t> ids = {7, 7, 1u << 20, 99, 12345678901ull};
  absl::StatusOr<SparseRequest> request = GroupIds(ids, 3);
  ASSERT_TRUE(request.ok()) << request.status();
  std::vector<std::vector<float>> rows = ServerRows(*request, dim);
  std::vector<float> out(ids.size() * dim, -1.0f);

  // One shard too few.
  std::vector<std::vector<float>> two(rows.begin(), rows.begin() + 2);
  absl::Status status = ScatterRows(*request, Spans(two), dim, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("2 shards"));

  // A shard that sent one float too many.
  int bad = 0;
  while (rows[bad].empty()) ++bad;
  rows[bad].push_back(0.0f);
  status = ScatterRows(*request, Spans(rows), dim, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("shard " + std::to_string(bad)));
  EXPECT_EQ(out, std::vector<float>(ids.size() * dim, -1.0f)) << "wrote despite the error";

  rows[bad].pop_back();
  status = ScatterRows(*request, Spans(rows), 0, out.data());
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(status.message(), HasSubstr("dim"));
}

// Rows land in the caller's `out` straight when the request is the
// identity, and through buffers scattered in caller order otherwise: the
// same rows as ScatterRows either way.
TEST(RowsLanding, IdentityLandsInOutOthersScatter) {
  const int dim = 3;
  for (int shards : {1, 4}) {
    for (bool ascending : {true, false}) {
      std::vector<uint64_t> ids = RandomIds(3000, ascending ? 100000 : 400, /*seed=*/5);
      if (ascending) {
        std::sort(ids.begin(), ids.end());
        ids.erase(std::unique(ids.begin(), ids.end()), ids.end());
      }
      absl::StatusOr<SparseRequest> request = GroupIds(ids, shards);
      ASSERT_TRUE(request.ok()) << request.status();
      std::vector<float> out(ids.size() * dim, -1.0f);
      const RowsLanding landing(*request, dim, absl::MakeSpan(out));
      ASSERT_EQ(landing.shards().size(), static_cast<size_t>(shards));
      EXPECT_EQ(landing.shards()[0].data() == out.data(), request->identity);
      EXPECT_EQ(request->identity, shards == 1 && ascending);
      const std::vector<std::vector<float>> rows = ServerRows(*request, dim);
      for (int s = 0; s < shards; ++s) {  // what a transport does
        ASSERT_EQ(landing.shards()[s].size(), rows[s].size());
        std::copy(rows[s].begin(), rows[s].end(), landing.shards()[s].begin());
      }
      ASSERT_TRUE(landing.Scatter().ok());
      std::vector<float> want(ids.size() * dim);
      ASSERT_TRUE(ScatterRows(*request, Spans(rows), dim, want.data()).ok());
      EXPECT_EQ(out, want) << shards << " shards, ascending " << ascending;
    }
  }
}

// With `borrow`, an identity request's gradients are the caller's own;
// without, or for any other request, SumGradients' copies.
TEST(GradientsByShard, BorrowsOnlyAnIdentityRequestsGradients) {
  const int dim = 2;
  const std::vector<uint64_t> sorted = {1, 5, 9}, repeats = {9, 1, 9};
  const std::vector<float> grads = {1, 2, 3, 4, 5, 6};
  for (bool borrow : {true, false}) {
    absl::StatusOr<SparseRequest> identity = GroupIds(sorted, 1);
    ASSERT_TRUE(identity.ok() && identity->identity);
    absl::StatusOr<ShardGradients> g = GradientsByShard(*identity, grads.data(), dim, borrow);
    ASSERT_TRUE(g.ok()) << g.status();
    ASSERT_EQ(g->views.size(), 1u);
    EXPECT_EQ(g->views[0].data() == grads.data(), borrow);
    EXPECT_EQ(std::vector<float>(g->views[0].begin(), g->views[0].end()), grads);
  }
  absl::StatusOr<SparseRequest> other = GroupIds(repeats, 1);
  ASSERT_TRUE(other.ok());
  absl::StatusOr<ShardGradients> g = GradientsByShard(*other, grads.data(), dim, true);
  ASSERT_TRUE(g.ok());
  EXPECT_THAT(std::vector<float>(g->views[0].begin(), g->views[0].end()),
              ::testing::ElementsAre(3, 4, 6, 8));  // id 1, then id 9 summed
  EXPECT_EQ(GradientsByShard(*other, grads.data(), 0, true).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(SumGradients, SumsRepeatsInCallerOrderBitForBit) {
  const int dim = 4;
  const std::vector<uint64_t> ids = RandomIds(6000, 200, /*seed=*/33);  // ~30 repeats per id
  absl::StatusOr<SparseRequest> request = GroupIds(ids, 3);
  ASSERT_TRUE(request.ok()) << request.status();
  // Magnitudes over many binades, so the order of the additions matters.
  std::mt19937_64 rng(44);
  std::uniform_real_distribution<float> unit(-1.0f, 1.0f);
  std::vector<float> grads(ids.size() * dim);
  for (float& g : grads) g = std::ldexp(unit(rng), static_cast<int>(rng() % 40) - 20);

  absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*request, grads.data(), dim);
  ASSERT_TRUE(sums.ok()) << sums.status();

  // Reference: per id, its rows in caller order (first row, then +=), and
  // the same in reverse order to show the order is observable.
  std::map<uint64_t, std::vector<float>> forward, backward;
  for (size_t i = 0; i < ids.size(); ++i) {
    auto [it, fresh] =
        forward.try_emplace(ids[i], grads.begin() + i * dim, grads.begin() + (i + 1) * dim);
    if (!fresh) {
      for (int j = 0; j < dim; ++j) it->second[j] += grads[i * dim + j];
    }
  }
  for (size_t i = ids.size(); i-- > 0;) {
    auto [it, fresh] =
        backward.try_emplace(ids[i], grads.begin() + i * dim, grads.begin() + (i + 1) * dim);
    if (!fresh) {
      for (int j = 0; j < dim; ++j) it->second[j] += grads[i * dim + j];
    }
  }
  bool order_mattered = false;
  for (int s = 0; s < request->num_shards(); ++s) {
    const std::vector<uint64_t>& list = request->shard_ids[s];
    ASSERT_EQ((*sums)[s].size(), list.size() * dim);
    for (size_t k = 0; k < list.size(); ++k) {
      const std::vector<float> got((*sums)[s].begin() + k * dim,
                                   (*sums)[s].begin() + (k + 1) * dim);
      EXPECT_TRUE(SameBits(got, forward[list[k]])) << "id " << list[k];
      if (!SameBits(got, backward[list[k]])) order_mattered = true;
    }
  }
  EXPECT_TRUE(order_mattered) << "the data does not tell summation orders apart";

  // And again: the same bits.
  absl::StatusOr<std::vector<std::vector<float>>> again = SumGradients(*request, grads.data(), dim);
  ASSERT_TRUE(again.ok());
  for (int s = 0; s < request->num_shards(); ++s) EXPECT_TRUE(SameBits((*sums)[s], (*again)[s]));
}

TEST(SumGradients, StartsFromTheFirstRowNotZero) {
  const std::vector<uint64_t> ids = {5, 6, 5};
  absl::StatusOr<SparseRequest> request = GroupIds(ids, 1);
  ASSERT_TRUE(request.ok());
  const std::vector<float> grads = {-0.0f, -0.0f, 1.5f};  // dim 1
  absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*request, grads.data(), 1);
  ASSERT_TRUE(sums.ok()) << sums.status();
  ASSERT_EQ(request->shard_ids[0], (std::vector<uint64_t>{5, 6}));
  EXPECT_EQ((*sums)[0][0], 1.5f);
  EXPECT_TRUE(std::signbit((*sums)[0][1])) << "a lone -0.0 became +0.0";
}

TEST(SumGradients, RejectsBadDim) {
  absl::StatusOr<SparseRequest> request = GroupIds(std::vector<uint64_t>{1}, 2);
  ASSERT_TRUE(request.ok());
  const float grad = 1.0f;
  absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*request, &grad, 0);
  ASSERT_FALSE(sums.ok());
  EXPECT_EQ(sums.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(sums.status().message(), HasSubstr("dim"));
}

// Performance sanity, not a benchmark: a million ids go through in well
// under a second on a laptop. Prints the times; asserts only correctness.
TEST(SparseIds, HandlesAMillionIds) {
  const int dim = 16;
  const int num_shards = 8;
  const std::vector<uint64_t> ids = RandomIds(1000000, 200000, /*seed=*/77);
  using Clock = std::chrono::steady_clock;
  auto ms = [](Clock::duration d) { return std::chrono::duration<double, std::milli>(d).count(); };

  const auto t0 = Clock::now();
  absl::StatusOr<SparseRequest> request = GroupIds(ids, num_shards);
  const auto t1 = Clock::now();
  ASSERT_TRUE(request.ok()) << request.status();

  const std::vector<std::vector<float>> rows = ServerRows(*request, dim);
  std::vector<float> out(ids.size() * dim);
  const auto t2 = Clock::now();
  ASSERT_TRUE(ScatterRows(*request, Spans(rows), dim, out.data()).ok());
  const auto t3 = Clock::now();
  absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*request, out.data(), dim);
  const auto t4 = Clock::now();
  ASSERT_TRUE(sums.ok()) << sums.status();

  size_t unique = 0;
  for (const auto& list : request->shard_ids) unique += list.size();
  EXPECT_EQ(unique, std::set<uint64_t>(ids.begin(), ids.end()).size());
  EXPECT_EQ(out[123456 * dim + 5], RowValue(ids[123456], 5));
  std::printf(
      "1M ids (%zu unique, %d shards, dim %d): GroupIds %.1f ms, ScatterRows %.1f ms, "
      "SumGradients %.1f ms\n",
      unique, num_shards, dim, ms(t1 - t0), ms(t3 - t2), ms(t4 - t3));
}

}  // namespace
}  // namespace ps
