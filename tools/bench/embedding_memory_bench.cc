// embedding_memory_bench: what one embedding-table row costs in memory.
//
// For each sparse optimizer, fills a fresh EmbeddingTable (server/
// embedding_table.h) with 1M rows of dim 16 and prints, per row, the table's
// own accounting (MemoryBytes) and the process's resident-set growth, next
// to the row's floats: RSS includes malloc's bookkeeping, so it is the
// number an operator sees. Each optimizer runs in a forked child, so no
// table reuses pages another freed. No flags:
//   bazel run //tools/bench:embedding_memory_bench
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <memory>
#include <string>
#include <vector>

#include "common/sparse_optimizer.h"
#include "server/core/embedding_table.h"
#include "tools/process/proc.h"

namespace {

// This process's resident set (VmRSS), in bytes.
absl::StatusOr<int64_t> RssBytes() { return ps::ProcStatusBytes(getpid(), "VmRSS"); }

// Fills one table and prints its line; the exit status for main.
int Measure(ps::SparseOptimizerKind kind) {
  constexpr int kDim = 16;
  constexpr int64_t kRows = 1000000;
  ps::EmbeddingTableOptions o;
  o.name = "bench";
  o.dim = kDim;
  o.optimizer.kind = kind;
  std::vector<uint64_t> ids(4096);
  std::vector<float> out(ids.size() * kDim);
  const absl::StatusOr<int64_t> rss_before = RssBytes();
  auto table = ps::EmbeddingTable::Create(o);
  if (!table.ok()) {
    std::fprintf(stderr, "%s\n", table.status().ToString().c_str());
    return 1;
  }
  for (int64_t next = 0; next < kRows;) {
    ids.resize(std::min<int64_t>(4096, kRows - next));
    for (uint64_t& id : ids) id = static_cast<uint64_t>(next++) * 7919;
    if (!(*table)->Pull(ids, out.data()).ok()) return 1;
  }
  const int64_t rows = (*table)->num_rows();
  const absl::StatusOr<int64_t> rss_after = RssBytes();
  for (const absl::Status& s : {rss_before.status(), rss_after.status()}) {
    if (!s.ok()) {
      std::fprintf(stderr, "%s\n", s.ToString().c_str());
      return 1;
    }
  }
  const int floats = kDim * (1 + o.optimizer.StateFloatsPerElement());
  std::printf(
      "%-8s %lld rows of dim %d: floats %d B/row, MemoryBytes %.2f B/row, "
      "RSS growth %.2f B/row\n",
      std::string(ps::SparseOptimizerName(kind)).c_str(), static_cast<long long>(rows), kDim,
      floats * 4, static_cast<double>((*table)->MemoryBytes()) / rows,
      static_cast<double>(*rss_after - *rss_before) / rows);
  std::fflush(stdout);
  return 0;
}

}  // namespace

int main() {
  for (ps::SparseOptimizerKind kind :
       {ps::SparseOptimizerKind::kSgd, ps::SparseOptimizerKind::kAdagrad,
        ps::SparseOptimizerKind::kAdam, ps::SparseOptimizerKind::kFtrl}) {
    std::fflush(stdout);
    const pid_t pid = fork();
    if (pid < 0) {
      std::perror("fork");
      return 1;
    }
    if (pid == 0) _exit(Measure(kind));
    int status = 0;
    if (waitpid(pid, &status, 0) != pid || !WIFEXITED(status) || WEXITSTATUS(status) != 0) {
      std::fprintf(stderr, "measuring %s failed\n",
                   std::string(ps::SparseOptimizerName(kind)).c_str());
      return 1;
    }
  }
  return 0;
}
