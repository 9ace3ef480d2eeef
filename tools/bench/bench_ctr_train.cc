#include "tools/bench/bench_ctr_train.h"

#include <cstdio>
#include <thread>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "tools/process/local_servers.h"
#include "worker/ctr/trainer.h"
#include "worker/ctr/workload.h"
#include "worker/run_loop.h"

namespace ps {
namespace {

struct CtrRun {
  double samples_per_sec = 0;  // all workers together
  double auc = 0;
};

// One worker of `workers` with batch `batch`, through ps_worker's run loop:
// against `client`'s servers, or alone (Adam at b.dense_lr, AdaGrad 0.05).
absl::StatusOr<RunResult> Train(const CtrTrainBenchOptions& b, int worker_id, int workers,
                                int batch, const ClientOptions* client) {
  CtrOptions o;
  o.worker_id = worker_id;
  o.num_workers = workers;
  o.data.vocab_sizes = {b.vocab};
  o.data.num_examples = b.examples;
  o.batch_size = batch;
  o.steps = b.steps;
  o.eval_examples = b.eval_examples;
  o.threads = 1;  // the workers share the machine's cores
  ASSIGN_OR_RETURN(std::unique_ptr<CtrWorkload> workload, CtrWorkload::Create(o));
  RunOptions r;
  r.worker_id = worker_id;
  r.num_workers = workers;
  r.log_every = 0;
  return RunWorker(r, workload.get(), client, CtrStandaloneStore(b.dense_lr));
}

double Auc(const RunResult& r) {
  return r.evaluation.has_value() ? r.evaluation->Get("auc").value_or(0) : 0;
}

absl::StatusOr<CtrRun> Distributed(const CtrTrainBenchOptions& b, Mode mode, int servers) {
  constexpr int kWorkers = 2;
  ServerOptions so;
  so.shard.num_workers = kWorkers;
  so.shard.mode = mode;
  so.shard.optimizer.name = "adam";
  so.shard.optimizer.learning_rate = b.dense_lr;
  ASSIGN_OR_RETURN(LocalServers local, LocalServers::Start(so, servers));
  std::vector<absl::StatusOr<RunResult>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co;
      co.servers = local.addresses;
      co.worker_id = w;
      co.num_workers = kWorkers;
      results[w] = Train(b, w, kWorkers, b.batch, &co);
    });
  }
  for (auto& t : threads) t.join();
  CtrRun run;
  for (int w = 0; w < kWorkers; ++w) {
    if (!results[w].ok()) return results[w].status();
    run.samples_per_sec += results[w]->samples_per_sec;
    if (b.print_workers) {
      std::printf("  %s, %d server(s): worker %d %.0f samples/s\n", ModeName(mode).c_str(),
                  servers, w, results[w]->samples_per_sec);
    }
  }
  run.auc = Auc(*results[0]);
  return run;
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunCtrTrainBench(const CtrTrainBenchOptions& b) {
  if (b.steps < 1) return absl::InvalidArgumentError("--max_steps must be >= 1 for --model=ctr");
  // The baseline: one process, one thread, the two workers' batch in one.
  ASSIGN_OR_RETURN(RunResult standalone, Train(b, 0, 1, 2 * b.batch, nullptr));
  std::vector<Row> rows;
  Row base;
  base.name = absl::StrCat("ctr standalone (1 process, 1 thread, batch ", 2 * b.batch, ")");
  base.value = base.baseline = standalone.samples_per_sec;
  base.accuracy = Auc(standalone);
  rows.push_back(base);
  for (int servers : {1, 2}) {
    for (Mode mode : {Mode::kSync, Mode::kAsync}) {
      ASSIGN_OR_RETURN(CtrRun run, Distributed(b, mode, servers));
      Row r;
      r.name = absl::StrCat("ctr ", ModeName(mode), " (", servers, servers == 1 ? " server" : " servers",
                            ", 2 workers, batch ", b.batch, " each)");
      r.value = run.samples_per_sec;
      r.baseline = standalone.samples_per_sec;
      r.accuracy = run.auc;
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace ps
