#include "tools/bench/bench_flags.h"

#include "absl/flags/flag.h"
#include "tools/process/runfiles.h"
#include "worker/mlp/dataset.h"

ABSL_FLAG(std::string, ops, "push,pull,push_pull", "transport, sparse: operations to measure.");
ABSL_FLAG(double, seconds, 1.0, "transport, apply, sparse: seconds to measure each figure.");
ABSL_FLAG(int, warmup, 3,
          "transport, sparse: untimed operations per client (sparse: per figure) before "
          "measuring.");
ABSL_FLAG(bool, json, false,
          "transport, apply, train: print one JSON object instead of tables (consistency: "
          "--csv).");
ABSL_FLAG(bool, tls, false,
          "transport: also measure each operation over mutual TLS, against plaintext in the "
          "same run; train: add TLS runs. Needs --tls_dir.");
ABSL_FLAG(std::string, tls_dir, "",
          "With --tls: certificates from deploy/make_certs.sh DIR --servers=1 --workers=W (the "
          "shards share server-0's certificate; client w uses worker-w's).");
ABSL_FLAG(std::string, dataset_dir, ps::kDefaultDatasetDir,
          "train, consistency: Fashion-MNIST folder.");
ABSL_FLAG(int64_t, max_steps, 0, "train: stop each configuration after this many steps (0 = all).");
ABSL_FLAG(double, row_timeout, 900,
          "consistency, train --processes: seconds before a row is cut off.");
ABSL_FLAG(int, repeats, 1,
          "consistency: runs of every row (all rows' first run, then all rows' second, ...); "
          "the table shows medians and each run's time. train: rounds of plain, scraped, "
          "scraped, plain for the --scrape_every row, which shows the means.");
ABSL_FLAG(std::string, server_binary, "",
          "consistency, train --processes, transport --server_process: ps_server to run; "
          "default: the one built beside ps_bench.");
ABSL_FLAG(std::string, worker_binary, "",
          "consistency, train --processes: ps_worker to run; default: the one built beside "
          "ps_bench.");

namespace ps {

BenchTls BenchTlsFromFlags() {
  BenchTls tls;
  tls.enabled = absl::GetFlag(FLAGS_tls);
  tls.dir = absl::GetFlag(FLAGS_tls_dir);
  return tls;
}

absl::StatusOr<std::string> ServerBinaryFromFlags() {
  const std::string flag = absl::GetFlag(FLAGS_server_binary);
  if (!flag.empty()) return flag;
  return FindRunfile("server/ps_server");
}

absl::StatusOr<std::string> WorkerBinaryFromFlags() {
  const std::string flag = absl::GetFlag(FLAGS_worker_binary);
  if (!flag.empty()) return flag;
  return FindRunfile("worker/ps_worker");
}

}  // namespace ps
