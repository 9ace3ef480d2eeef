// embedding_lookup_bench: the server's row store alone on ps_bench sparse's
// cold workload (tools/bench/rows_pool.h): a table of about a million rows,
// requests of K distinct sorted ids cycling through them, pull (copy the
// rows out) and push (SGD on the rows), against ps-lite's row store in the
// same run: an std::unordered_map from id to a std::vector<float> row, the
// store of ../shared/pslite's driver. Prints M rows/s and the ratio. No
// network, one caller (the table uses every core for a call of 4,096 ids
// or more, EmbeddingTableOptions::parallel_ids; the map one thread): what a
// request costs inside a server.
//
//   bazel run -c opt //tools/bench:embedding_lookup_bench -- [--seconds=1]
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/sparse_optimizer.h"
#include "server/core/embedding_table.h"
#include "tools/bench/rows_pool.h"

namespace {

using Clock = std::chrono::steady_clock;

// M rows/s of `op` over the pool's requests for `seconds`, after a pass.
double Rate(const ps::RowsPool& pool, double seconds, const std::function<void(size_t)>& op) {
  for (size_t r = 0; r < pool.requests.size(); ++r) op(r);
  size_t rows = 0, r = 0;
  const auto start = Clock::now();
  double elapsed = 0;
  do {
    op(r % pool.requests.size());
    rows += pool.requests[r % pool.requests.size()].size();
    ++r;
    elapsed = std::chrono::duration<double>(Clock::now() - start).count();
  } while (elapsed < seconds);
  return rows / elapsed / 1e6;
}

}  // namespace

int main(int argc, char** argv) {
  double seconds = 1;
  for (int i = 1; i < argc; ++i) {
    if (std::strncmp(argv[i], "--seconds=", 10) == 0) {
      seconds = std::atof(argv[i] + 10);
    } else {
      std::fprintf(stderr, "usage: embedding_lookup_bench [--seconds=S]\n");
      return 2;
    }
  }
  std::printf("%-8s %4s %7s %10s %14s %7s\n", "op", "dim", "K", "Mrows/s", "unordered_map",
              "ratio");
  for (int64_t k : {1000, 100000}) {
    ps::RowsPoolOptions po;
    po.ids_per_request = k;
    absl::StatusOr<ps::RowsPool> pool = ps::MakeRowsPool(po);
    if (!pool.ok()) return std::fprintf(stderr, "%s\n", pool.status().ToString().c_str()), 1;
    for (int dim : {16, 64}) {
      ps::EmbeddingTableOptions o;
      o.name = "t";
      o.dim = dim;
      o.optimizer.kind = ps::SparseOptimizerKind::kSgd;
      o.optimizer.lr = 0.01f;
      auto table = ps::EmbeddingTable::Create(o);
      if (!table.ok()) return 1;
      std::unordered_map<uint64_t, std::vector<float>> map;
      std::vector<float> grads(k * dim, 1e-3f), out(k * dim);
      for (const auto& chunk : pool->populate) {  // every row, in random order
        if (!(*table)->Apply(chunk, grads.data()).ok()) return 1;
        for (uint64_t id : chunk) map.emplace(id, std::vector<float>(dim, 0.0f));
      }
      for (const char* op : {"pull", "push"}) {
        const bool pull = op[1] == 'u' && op[2] == 'l';
        const double ours = Rate(*pool, seconds, [&](size_t r) {
          const auto& ids = pool->requests[r];
          if (pull) {
            (void)(*table)->Pull(ids, out.data());
          } else {
            (void)(*table)->Apply(ids, grads.data());
          }
        });
        const double base = Rate(*pool, seconds, [&](size_t r) {
          const auto& ids = pool->requests[r];
          for (size_t i = 0; i < ids.size(); ++i) {
            float* w = map[ids[i]].data();
            if (pull) {
              std::memcpy(out.data() + i * dim, w, dim * sizeof(float));
            } else {
              for (int j = 0; j < dim; ++j) w[j] -= 0.01f * grads[i * dim + j];
            }
          }
        });
        std::printf("%-8s %4d %7lld %10.2f %14.2f %7.2f\n", op, dim, static_cast<long long>(k),
                    ours, base, ours / base);
        std::fflush(stdout);
      }
    }
  }
  return 0;
}
