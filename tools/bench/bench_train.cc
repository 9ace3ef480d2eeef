#include "tools/bench/bench_train.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/status_macros.h"
#include "tools/bench/metrics_scraper.h"
#include "tools/bench/train_processes.h"
#include "tools/process/local_servers.h"
#include "worker/mlp/workload.h"
#include "worker/run_loop.h"

namespace ps {
namespace {

struct TrainRun {
  double samples_per_sec = 0;  // all workers together
  double accuracy = 0;
};

// One worker of `workers` with batch `batch` on `threads` OpenBLAS threads,
// through ps_worker's run loop: against `client`'s servers, or alone.
absl::StatusOr<RunResult> Train(const TrainBenchOptions& b,
                                const std::shared_ptr<const FashionMnist>& data, int worker_id,
                                int workers, int batch, int threads, const ClientOptions* client,
                                WorkerMetrics* metrics = nullptr) {
  MlpOptions m;
  m.worker_id = worker_id;
  m.num_workers = workers;
  m.batch_size = batch;
  m.epochs = b.epochs;
  m.max_steps = b.max_steps;
  m.backend = {"cpu", threads};
  ASSIGN_OR_RETURN(std::unique_ptr<MlpWorkload> workload, MlpWorkload::Create(m, data));
  RunOptions r;
  r.worker_id = worker_id;
  r.num_workers = workers;
  r.log_every = 0;
  ReporterOptions ro;
  ro.worker_id = worker_id;
  ro.external_metrics = metrics;
  ASSIGN_OR_RETURN(std::unique_ptr<Reporter> reporter, Reporter::Create(ro));
  LocalStoreOptions standalone;
  standalone.dense = OptimizerOptions{"sgd", b.lr};
  return RunWorker(r, workload.get(), client, standalone, reporter.get());
}

double Accuracy(const RunResult& r) {
  return r.evaluation.has_value() ? r.evaluation->Get("test_accuracy").value_or(0) : 0;
}

absl::StatusOr<TrainRun> Standalone(const TrainBenchOptions& b,
                                    const std::shared_ptr<const FashionMnist>& data) {
  ASSIGN_OR_RETURN(RunResult r, Train(b, data, 0, 1, 128, 2, nullptr));
  return TrainRun{r.samples_per_sec, Accuracy(r)};
}

// `fault_tolerant`: as ps_server and ps_worker run by default, with
// checkpoints every b.checkpoint_every versions into a temporary folder.
// `scraped`: /metrics on the servers and workers, scraped every
// b.scrape_every.
absl::StatusOr<TrainRun> Distributed(const TrainBenchOptions& b,
                                     const std::shared_ptr<const FashionMnist>& data, Mode mode,
                                     bool fault_tolerant, bool tls, bool scraped = false) {
  constexpr int kWorkers = 2;
  ServerOptions so;
  so.security = BenchSecurity(b.tls, tls);
  so.shard.num_workers = kWorkers;
  so.shard.mode = mode;
  so.shard.optimizer.learning_rate = b.lr;
  std::string dir;
  if (fault_tolerant) {
    char tmpl[] = "/tmp/ps_bench_ckpt.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary folder");
    dir = tmpl;
    so.shard.worker_timeout = absl::Seconds(10);
    so.checkpoints.dir = dir;
    so.checkpoints.every_versions = b.checkpoint_every;
  }
  if (scraped) so.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<LocalServers> server = LocalServers::Start(so, 1);
  if (!server.ok()) return server.status();
  std::unique_ptr<BenchScrape> scrape;
  if (scraped) {
    ASSIGN_OR_RETURN(scrape, BenchScrape::Start({server->servers[0]->metrics_address()}, kWorkers,
                                                b.scrape_every));
  }
  std::vector<absl::StatusOr<RunResult>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co;
      co.servers = server->addresses;
      co.worker_id = w;
      co.num_workers = kWorkers;
      co.security = BenchSecurity(b.tls, tls, w);
      if (fault_tolerant) co.retry_timeout = absl::Seconds(60);
      results[w] =
          Train(b, data, w, kWorkers, 64, 1, &co, scrape != nullptr ? scrape->worker(w) : nullptr);
    });
  }
  for (auto& t : threads) t.join();
  if (scrape != nullptr && b.print_workers) {
    std::printf("  /metrics scraped %lld times (%lld failed)\n",
                static_cast<long long>(scrape->scraper().scrapes()),
                static_cast<long long>(scrape->scraper().failures()));
  }
  scrape.reset();
  server->servers.clear();  // writes the final checkpoint
  if (!dir.empty()) std::filesystem::remove_all(dir);
  TrainRun run;
  for (int w = 0; w < kWorkers; ++w) {
    if (!results[w].ok()) return results[w].status();
    run.samples_per_sec += results[w]->samples_per_sec;
    if (b.print_workers) {
      std::printf("  %s worker %d: compute %.1f s, push-pull wait %.1f s\n",
                  ModeName(mode).c_str(), w, results[w]->compute_s, results[w]->comm_s);
    }
  }
  run.accuracy = Accuracy(*results[0]);
  return run;
}

// The --scrape_every row, given the plain sync run and the scraped one
// just made: b.scrape_rounds rounds of A-B-B-A (the first A and B those
// runs, then two scraped runs and one more plain one; then plain, scraped,
// scraped, plain for each further round), so neither the order nor a drift
// of the machine favours a side. The row holds the means of each side's
// samples/s over all its runs, and the standard error of the rounds' ratios
// (their spread over sqrt(rounds)); each round's ratio is printed as it comes.
absl::StatusOr<Row> ScrapedRow(const TrainBenchOptions& b,
                               const std::shared_ptr<const FashionMnist>& data,
                               const Row& plain_row, TrainRun scraped) {
  TrainRun plain{plain_row.value, plain_row.accuracy};
  double plain_sum = 0, scraped_sum = 0;
  std::vector<double> ratios;
  for (int round = 0; round < b.scrape_rounds; ++round) {
    if (round > 0) {
      ASSIGN_OR_RETURN(plain, Distributed(b, data, Mode::kSync, false, false));
      ASSIGN_OR_RETURN(scraped, Distributed(b, data, Mode::kSync, false, false, true));
    }
    ASSIGN_OR_RETURN(TrainRun scraped2, Distributed(b, data, Mode::kSync, false, false, true));
    ASSIGN_OR_RETURN(TrainRun plain2, Distributed(b, data, Mode::kSync, false, false));
    const double s = scraped.samples_per_sec + scraped2.samples_per_sec;
    const double p = plain.samples_per_sec + plain2.samples_per_sec;
    ratios.push_back(s / p);
    scraped_sum += s;
    plain_sum += p;
    if (b.print_workers) {
      std::printf("  round %d of %d (plain, scraped, scraped, plain): scraped/plain %.4f\n",
                  round + 1, b.scrape_rounds, ratios.back());
    }
  }
  Row r;
  r.name = absl::StrCat("sync, /metrics scraped every ", absl::FormatDuration(b.scrape_every),
                        " (vs sync, ABBA)");
  r.value = scraped_sum / (2 * b.scrape_rounds);
  r.baseline = plain_sum / (2 * b.scrape_rounds);
  r.accuracy = scraped.accuracy;
  if (ratios.size() > 1) {
    double mean = 0, var = 0;
    for (double x : ratios) mean += x / ratios.size();
    for (double x : ratios) var += (x - mean) * (x - mean) / (ratios.size() - 1);
    r.ratio_se = std::sqrt(var / ratios.size());
  }
  return r;
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunTrainBench(const TrainBenchOptions& b) {
  RETURN_IF_ERROR(CheckBenchTls(b.tls));
  ASSIGN_OR_RETURN(FashionMnist loaded, LoadFashionMnist(b.dataset_dir));
  const auto data = std::make_shared<const FashionMnist>(std::move(loaded));
  auto standalone = Standalone(b, data);
  if (!standalone.ok()) return standalone.status();
  std::vector<Row> rows;
  Row base;
  base.name = "standalone (1 process, 2 threads, batch 128)";
  base.value = base.baseline = standalone->samples_per_sec;
  base.accuracy = standalone->accuracy;
  rows.push_back(base);
  struct Config {
    Mode mode;
    bool fault_tolerant;
    bool tls;
    bool scraped = false;
  };
  std::vector<Config> configs = {{Mode::kSync, false, false}, {Mode::kAsync, false, false}};
  if (b.checkpoint_every > 0) configs.push_back({Mode::kSync, true, false});
  // Right after the plain sync row, its baseline.
  if (b.scrape_every > absl::ZeroDuration()) {
    configs.insert(configs.begin() + 1, {Mode::kSync, false, false, true});
  }
  if (b.tls.enabled) {
    configs.push_back({Mode::kSync, false, true});
    configs.push_back({Mode::kAsync, false, true});
  }
  for (const Config& c : configs) {
    auto run = Distributed(b, data, c.mode, c.fault_tolerant, c.tls, c.scraped);
    if (!run.ok()) return run.status();
    Row r;
    if (c.scraped) {
      ASSIGN_OR_RETURN(r, ScrapedRow(b, data, rows.back(), *run));
      rows.push_back(r);
      continue;
    }
    r.name = c.fault_tolerant
                 ? absl::StrCat("sync, fault tolerant (ckpt every ", b.checkpoint_every, ")")
                 : absl::StrCat(ModeName(c.mode), c.tls ? ", mutual TLS" : "",
                                " (1 server, 2 workers, batch 64 each)");
    r.value = run->samples_per_sec;
    r.baseline = standalone->samples_per_sec;
    r.accuracy = run->accuracy;
    rows.push_back(r);
  }
  if (!b.processes) return rows;
  std::vector<bool> sockets;  // unix_socket of each pair of process rows
  if (b.process_unix) sockets.push_back(true);
  if (b.process_tcp) sockets.push_back(false);
  for (bool unix_socket : sockets) {
    for (Mode mode : {Mode::kSync, Mode::kAsync}) {
      TrainProcessesOptions o;
      o.server_binary = b.server_binary;
      o.worker_binary = b.worker_binary;
      o.mode = mode;
      o.unix_socket = unix_socket;
      o.epochs = b.epochs;
      o.max_steps = b.max_steps;
      o.lr = b.lr;
      o.dataset_dir = b.dataset_dir;
      o.timeout = b.process_timeout;
      ASSIGN_OR_RETURN(const TrainProcessesResult run, RunTrainProcesses(o));
      Row r;
      r.name = absl::StrCat(ModeName(mode), ", separate processes, ",
                            unix_socket ? "unix socket" : "loopback TCP");
      r.value = run.samples_per_sec;
      r.baseline = standalone->samples_per_sec;
      r.accuracy = run.accuracy;
      rows.push_back(r);
    }
  }
  return rows;
}

}  // namespace ps
