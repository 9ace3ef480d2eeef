// What ps_bench's modes (tools/bench/bench_transport.h, bench_apply.h,
// bench_train.h) share: a measured figure and its baseline (Row), how rows
// are printed (a table per mode, or one JSON object), CPU time around a
// measurement, and the TLS certificates of a benchmark run. Stateless
// helpers; thread-safe.
#ifndef PS_TOOLS_BENCH_BENCH_COMMON_H_
#define PS_TOOLS_BENCH_BENCH_COMMON_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security_options.h"

namespace ps {

// One measured figure and its baseline.
struct Row {
  std::string name;
  int64_t bytes = 0;    // payload per op (transport) or elements (apply)
  double value = 0;     // GB/s or samples/s
  double baseline = 0;  // same unit, measured in the same run
  double p50_us = -1, p99_us = -1;
  double baseline_p50_us = -1;
  // Transport: process CPU time (all threads, user + system) per MB moved.
  // When both ends share the cores, value/baseline cannot beat
  // baseline_cpu_us_per_mb / cpu_us_per_mb for long.
  double cpu_us_per_mb = -1, baseline_cpu_us_per_mb = -1;
  // Transport --server_process: the server processes' CPU time per MB moved
  // (the fields above are then the client process's alone).
  double server_cpu_us_per_mb = -1, baseline_server_cpu_us_per_mb = -1;
  double accuracy = -1;  // train only
  // Train's --scrape_every row over several rounds: the standard error of
  // the rounds' ratios.
  double ratio_se = -1;
  // Sparse only: ids per request, caller ids per second, and the share of a
  // request's ids that are distinct (-1 in the cold workload's rows, whose
  // value and baseline are M rows/s, ours and ps-lite's).
  int64_t ids = 0;
  double rows_per_s = -1, unique_fraction = -1;
  // Elastic only: the longest time between two steps after the event.
  double pause_ms = -1;
};

// Where a benchmark's certificates are, when it measures TLS.
struct BenchTls {
  bool enabled = false;  // ps_bench --tls
  // From deploy/make_certs.sh DIR --servers=1 --workers=W: the shards share
  // server-0's certificate; client w uses worker-w's.
  std::string dir;
};

// INVALID_ARGUMENT when `tls` is enabled without a folder.
absl::Status CheckBenchTls(const BenchTls& tls);

// With TLS (`use` and tls.enabled), the security of the shards (server-0's
// certificate) or of client `worker` (worker-<worker>'s); plaintext
// otherwise.
SecurityOptions BenchSecurity(const BenchTls& tls, bool use, int worker = -1);

// The process's CPU time so far, all threads, user + system.
double ProcessCpuSeconds();

// Runs `f`, which returns OpTimings for `ops_beyond_timed` more operations
// than it counts (its warm-up), and the process CPU µs per MB they moved.
template <typename F>
auto WithCpu(int64_t bytes_per_op, int64_t ops_beyond_timed, F f)
    -> std::pair<decltype(f()), double> {
  const double start = ProcessCpuSeconds();
  auto r = f();
  const double cpu = ProcessCpuSeconds() - start;
  double per_mb = -1;
  if (r.ok()) per_mb = cpu * 1e6 / (double(bytes_per_op) * (r->ops + ops_beyond_timed) / 1e6);
  return {std::move(r), per_mb};
}

// The q-quantile of `v`, in microseconds; 0 when empty.
double Percentile(std::vector<absl::Duration> v, double q);

// A non-empty list of positive integers from --`flag`.
absl::StatusOr<std::vector<int64_t>> ParseNonEmptyList(const std::string& text, const char* flag);

// {"mode": section, "rows": [...]} on one line.
std::string Json(const std::string& section, const std::vector<Row>& rows);

// The human-readable table of a mode ("transport", "apply" or "train").
void PrintTable(const std::string& section, const std::vector<Row>& rows);

// A folder of /tmp, removed with what it holds when the object goes.
struct TempDir {
  std::string path;
  // /tmp/<prefix>.XXXXXX, or INTERNAL.
  static absl::StatusOr<TempDir> Make(const std::string& prefix);
  TempDir() = default;
  TempDir(TempDir&& o) : path(std::exchange(o.path, "")) {}
  TempDir& operator=(TempDir&&) = delete;
  ~TempDir();
};

}  // namespace ps

#endif  // PS_TOOLS_BENCH_BENCH_COMMON_H_
