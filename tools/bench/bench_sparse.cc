#include "tools/bench/bench_sparse.h"

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <utility>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "client/ps_client.h"
#include "common/embedding_shard.h"
#include "common/status_macros.h"
#include "tools/process/local_servers.h"
#include "worker/ctr/data.h"

namespace ps {
namespace {

struct Measured {
  double ops_per_s = 0, p50_us = 0, p99_us = 0;
};

// Times `op` for `duration` (and at least 3 runs) after `warmup` untimed runs.
absl::StatusOr<Measured> Measure(int warmup, absl::Duration duration,
                                 const std::function<absl::Status()>& op) {
  for (int i = 0; i < warmup; ++i) RETURN_IF_ERROR(op());
  std::vector<absl::Duration> lat;
  const absl::Time start = absl::Now();
  absl::Time now = start;
  while (now - start < duration || lat.size() < 3) {
    RETURN_IF_ERROR(op());
    const absl::Time end = absl::Now();
    lat.push_back(end - now);
    now = end;
  }
  return Measured{lat.size() / absl::ToDoubleSeconds(now - start), Percentile(lat, 0.5),
                  Percentile(lat, 0.99)};
}

std::vector<uint64_t> DrawIds(int64_t n, int64_t vocab, bool zipf, uint64_t seed) {
  std::vector<uint64_t> ids(n);
  const ZipfSampler sampler(vocab, 1.1);
  for (int64_t i = 0; i < n; ++i) {
    const uint64_t h = Mix64(seed * 0x9e3779b97f4a7c15ull + i);
    if (!zipf) {
      ids[i] = h % vocab;
      continue;
    }
    const uint64_t rank = sampler.Sample(
        [&](int a) { return (static_cast<double>(Mix64(h + a) >> 11) + 0.5) * 0x1.0p-53; });
    ids[i] = Mix64(rank) % vocab;  // hot ranks scattered over the ids
  }
  return ids;
}

absl::StatusOr<std::vector<std::string>> Names(const std::string& text, const char* flag,
                                               std::vector<std::string> known) {
  std::vector<std::string> out;
  for (absl::string_view s : absl::StrSplit(text, ',', absl::SkipWhitespace())) {
    if (std::find(known.begin(), known.end(), s) == known.end()) {
      return absl::InvalidArgumentError(absl::StrCat("--", flag, ": unknown entry '", s, "'"));
    }
    out.emplace_back(s);
  }
  if (out.empty()) return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  return out;
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunSparseBench(const SparseBenchOptions& o) {
  if (o.workload == "cold") return RunColdRowsBench(o.cold);
  ASSIGN_OR_RETURN(const std::vector<int64_t> sizes, ParseNonEmptyList(o.ids, "sparse_ids"));
  ASSIGN_OR_RETURN(const std::vector<int64_t> dims, ParseNonEmptyList(o.dims, "dims"));
  ASSIGN_OR_RETURN(const std::vector<std::string> dists,
                   Names(o.dists, "dists", {"uniform", "zipf"}));
  ASSIGN_OR_RETURN(const std::vector<std::string> ops,
                   Names(o.ops, "ops", {"pull", "push", "push_pull"}));
  if (o.shards < 1) return absl::InvalidArgumentError("--shards must be >= 1");
  if (o.vocab < 1) return absl::InvalidArgumentError("--vocab must be >= 1");
  std::vector<Row> rows;
  for (int64_t n : sizes) {
    for (int64_t dim : dims) {
      if (dim > 65536) return absl::InvalidArgumentError("--dims: at most 65536");
      ServerOptions base;
      base.shard.mode = Mode::kAsync;
      base.shard.num_workers = 1;
      base.shard.optimizer.learning_rate = 1e-6f;
      base.shard.tables.optimizer = {SparseOptimizerKind::kAdagrad, 1e-6f};
      base.shard.tables.max_ids_per_request = std::max<int64_t>(n, 1);
      ASSIGN_OR_RETURN(LocalServers servers, LocalServers::Start(base, o.shards));
      ClientOptions co;
      co.servers = servers.addresses;
      co.num_workers = 1;
      ASSIGN_OR_RETURN(std::unique_ptr<PsClient> client, PsClient::Connect(co));
      RETURN_IF_ERROR(client->DeclareTables({TableSpec{"t", static_cast<int>(dim), 1, 0.01f}}));
      const int64_t floats = n * dim;
      TensorList init = {std::vector<float>(floats, 0.0f)};
      RETURN_IF_ERROR(client->Init({{"w", {floats}}}, &init));
      TensorList weights = init, grads = {std::vector<float>(floats, 1e-3f)};
      std::vector<float> out(floats), rgrads(floats, 1e-3f);
      const int64_t bytes = floats * 4;
      // The dense baselines of this size, once.
      std::map<std::string, Measured> dense;
      for (const std::string& op : ops) {
        std::function<absl::Status()> f;
        if (op == "pull") f = [&] { return client->Pull(0, &weights); };
        if (op == "push") f = [&] { return client->Push(grads); };
        if (op == "push_pull") f = [&] { return client->PushPull(grads, &weights); };
        ASSIGN_OR_RETURN(dense[op], Measure(o.warmup, o.duration, f));
      }
      for (const std::string& dist : dists) {
        const std::vector<uint64_t> ids = DrawIds(n, o.vocab, dist == "zipf", 1 + n + dim);
        const absl::flat_hash_set<uint64_t> unique(ids.begin(), ids.end());
        for (const std::string& op : ops) {
          std::function<absl::Status()> f;
          if (op == "pull") f = [&] { return client->PullRows("t", ids, absl::MakeSpan(out)); };
          if (op == "push") f = [&] { return client->PushRows("t", ids, rgrads); };
          if (op == "push_pull") {
            f = [&] {
              RETURN_IF_ERROR(client->PushRows("t", ids, rgrads));
              return client->PullRows("t", ids, absl::MakeSpan(out));
            };
          }
          ASSIGN_OR_RETURN(const Measured m, Measure(o.warmup, o.duration, f));
          Row r;
          r.name = absl::StrCat(op, " ", dist, " d", dim);
          r.bytes = bytes;
          r.value = m.ops_per_s * bytes / 1e9;
          r.p50_us = m.p50_us;
          r.p99_us = m.p99_us;
          r.baseline = dense[op].ops_per_s * bytes / 1e9;
          r.baseline_p50_us = dense[op].p50_us;
          r.rows_per_s = m.ops_per_s * n;
          r.unique_fraction = static_cast<double>(unique.size()) / n;
          r.ids = n;
          rows.push_back(r);
        }
      }
    }
  }
  return rows;
}

}  // namespace ps
