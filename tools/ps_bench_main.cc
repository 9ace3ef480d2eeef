// ps_bench: measures the parameter server against baselines taken in the same
// run, and prints every figure as a ratio of its baseline.
//
//   ps_bench transport   push / pull / push-pull throughput and latency over
//                        real gRPC shards, against raw loopback TCP
//   ps_bench apply       the optimizer's apply rate, against a plain axpy loop
//   ps_bench train       Fashion-MNIST MLP: standalone, then 1 server and 2
//                        workers in sync and in async mode
//
// Human-readable tables by default; --json prints one JSON object instead.
#include <sys/resource.h>

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <string>
#include <filesystem>
#include <thread>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"
#include "common/allocator.h"
#include "common/flag_lists.h"
#include "common/optimizer.h"
#include "common/status_macros.h"
#include "tools/local_servers.h"
#include "tools/raw_tcp.h"
#include "worker/backend.h"
#include "worker/dataset.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, sizes, "4096,65536,1048576,4194304,16777216,67108864",
          "transport: payload sizes in bytes (multiples of 4).");
ABSL_FLAG(int, shards, 1, "transport: number of in-process server shards (S).");
ABSL_FLAG(std::string, ops, "push,pull,push_pull", "transport: operations to measure.");
ABSL_FLAG(int, clients, 1, "transport: number of client threads (W), one connection each.");
ABSL_FLAG(double, seconds, 1.0, "transport/apply: seconds to measure each figure.");
ABSL_FLAG(int, warmup, 3, "transport: untimed operations per client before measuring.");
ABSL_FLAG(std::string, transports, "stream,unary",
          "transport: client transports to measure (stream and/or unary).");
ABSL_FLAG(std::string, apply_elements, "1048576,16777216",
          "apply: shard sizes in float32 elements.");
ABSL_FLAG(int, epochs, 3, "train: epochs for each configuration.");
ABSL_FLAG(int64_t, max_steps, 0, "train: stop each configuration after this many steps (0 = all).");
ABSL_FLAG(double, lr, 0.1, "train: learning rate.");
ABSL_FLAG(int64_t, checkpoint_every, 100,
          "train: the \"sync, fault tolerant\" row's checkpoint interval, in versions (its "
          "server also holds 10 s worker leases, its workers keep a copy for restores and "
          "send heartbeats). 0 = leave that row out.");
ABSL_FLAG(std::string, dataset_dir, ps::kDefaultDatasetDir, "train: Fashion-MNIST folder.");
ABSL_FLAG(bool, json, false, "Print one JSON object instead of tables.");
ABSL_FLAG(bool, tls, false,
          "transport: also measure each operation over mutual TLS, against plaintext in the "
          "same run; train: add TLS runs. Needs --tls_dir.");
ABSL_FLAG(std::string, tls_dir, "",
          "With --tls: certificates from deploy/make_certs.sh DIR --servers=1 --workers=W (the "
          "shards share server-0's certificate; client w uses worker-w's).");

namespace ps {
namespace {

// One measured figure and its baseline.
struct Row {
  std::string name;
  int64_t bytes = 0;          // payload per op (transport) or elements (apply)
  double value = 0;           // GB/s or samples/s
  double baseline = 0;        // same unit, measured in the same run
  double p50_us = -1, p99_us = -1;
  double baseline_p50_us = -1;
  // Transport: process CPU time (all threads, user + system) per MB moved.
  // When both ends share the cores, value/baseline cannot beat
  // baseline_cpu_us_per_mb / cpu_us_per_mb for long.
  double cpu_us_per_mb = -1, baseline_cpu_us_per_mb = -1;
  double accuracy = -1;       // train only
};

double ProcessCpuSeconds() {
  rusage u;
  getrusage(RUSAGE_SELF, &u);
  auto secs = [](const timeval& t) { return t.tv_sec + t.tv_usec * 1e-6; };
  return secs(u.ru_utime) + secs(u.ru_stime);
}

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

std::string Json(const std::string& section, const std::vector<Row>& rows) {
  std::vector<std::string> objs;
  for (const Row& r : rows) {
    std::string o = absl::StrFormat(
        "{\"name\": \"%s\", \"size\": %d, \"value\": %.6g, \"baseline\": %.6g, \"ratio\": %.4f",
        r.name, r.bytes, r.value, r.baseline, r.baseline > 0 ? r.value / r.baseline : 0);
    if (r.p50_us >= 0) {
      absl::StrAppendFormat(&o, ", \"p50_us\": %.1f, \"p99_us\": %.1f, \"baseline_p50_us\": %.1f",
                            r.p50_us, r.p99_us, r.baseline_p50_us);
    }
    if (r.cpu_us_per_mb >= 0) {
      absl::StrAppendFormat(&o, ", \"cpu_us_per_mb\": %.1f, \"baseline_cpu_us_per_mb\": %.1f",
                            r.cpu_us_per_mb, r.baseline_cpu_us_per_mb);
    }
    if (r.accuracy >= 0) absl::StrAppendFormat(&o, ", \"test_accuracy\": %.4f", r.accuracy);
    objs.push_back(o + "}");
  }
  return absl::StrCat("{\"mode\": \"", section, "\", \"rows\": [", absl::StrJoin(objs, ", "),
                      "]}");
}

std::string HumanBytes(int64_t b) {
  if (b >= (1 << 20)) return absl::StrCat(b >> 20, " MB");
  if (b >= (1 << 10)) return absl::StrCat(b >> 10, " KB");
  return absl::StrCat(b, " B");
}

double Percentile(std::vector<absl::Duration> v, double q) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t i = std::min(v.size() - 1, static_cast<size_t>(q * (v.size() - 1) + 0.5));
  return absl::ToDoubleMicroseconds(v[i]);
}

absl::StatusOr<std::vector<int64_t>> ParseList(const std::string& text, const char* flag) {
  absl::StatusOr<std::vector<int64_t>> out = ParsePositiveList(flag, text);
  if (out.ok() && out->empty()) {
    return absl::InvalidArgumentError(absl::StrCat("--", flag, " is empty"));
  }
  return out;
}

// ---------------------------------------------------------------- transport

enum class Op { kPush, kPull, kPushPull };

// Runs `op` on W clients against the cluster for about `duration`.
absl::StatusOr<OpTimings> RunPsOps(Op op, const std::vector<std::unique_ptr<PsClient>>& clients,
                                   int64_t floats, int warmup, absl::Duration duration) {
  const int W = static_cast<int>(clients.size());
  absl::Mutex mu;
  OpTimings result;
  absl::Status error;
  absl::Time end = absl::InfinitePast();
  auto* ready = new absl::Barrier(W + 1);
  std::vector<std::thread> threads;
  for (int w = 0; w < W; ++w) {
    threads.emplace_back([&, w] {
      PsClient* c = clients[w].get();
      TensorList grads = {std::vector<float>(floats, 1e-9f)};
      TensorList weights;
      auto run = [&]() -> absl::Status {
        switch (op) {
          case Op::kPush: return c->Push(grads);
          case Op::kPull: return c->Pull(0, &weights);
          case Op::kPushPull: return c->PushPull(grads, &weights);
        }
        return absl::OkStatus();
      };
      absl::Status s;
      for (int i = 0; s.ok() && i < warmup; ++i) s = run();
      if (ready->Block()) delete ready;
      std::vector<absl::Duration> lat;
      absl::Time t = absl::Now();
      const absl::Time stop = t + duration;
      while (s.ok() && (t < stop || lat.empty())) {
        s = run();
        const absl::Time now = absl::Now();
        lat.push_back(now - t);
        t = now;
      }
      absl::MutexLock l(&mu);
      if (!s.ok() && error.ok()) error = s;
      result.ops += static_cast<int64_t>(lat.size());
      result.latencies.insert(result.latencies.end(), lat.begin(), lat.end());
      end = std::max(end, t);
    });
  }
  if (ready->Block()) delete ready;
  const absl::Time start = absl::Now();
  for (auto& t : threads) t.join();
  if (!error.ok()) return error;
  result.wall = end - start;
  return result;
}

double GBps(int64_t bytes_per_op, const OpTimings& t) {
  return double(bytes_per_op) * t.ops / absl::ToDoubleSeconds(t.wall) / 1e9;
}

// With --tls, the security of the shards (server-0's certificate) or of
// client `worker` (worker-<worker>'s), from --tls_dir; plaintext otherwise.
SecurityOptions Security(bool tls, int worker = -1) {
  SecurityOptions o;
  if (!tls) return o;
  const std::string dir = absl::GetFlag(FLAGS_tls_dir);
  const std::string name = worker < 0 ? "server-0" : absl::StrCat("worker-", worker);
  o.tls_ca = absl::StrCat(dir, "/ca.pem");
  o.tls_cert = absl::StrCat(dir, "/", name, ".pem");
  o.tls_key = absl::StrCat(dir, "/", name, ".key");
  return o;
}

absl::Status CheckTlsFlags() {
  if (!absl::GetFlag(FLAGS_tls)) return absl::OkStatus();
  if (absl::GetFlag(FLAGS_tls_dir).empty()) {
    return absl::InvalidArgumentError(
        "--tls needs --tls_dir=DIR, made by deploy/make_certs.sh DIR --servers=1 --workers=W");
  }
  return absl::OkStatus();
}

// One transport row: `clients` run `op` on `floats`-element tensors.
absl::StatusOr<Row> MeasureOp(const std::string& name, Op op, int64_t size, int64_t op_bytes,
                              const std::vector<std::unique_ptr<PsClient>>& clients,
                              int warmup, absl::Duration duration) {
  const int W = static_cast<int>(clients.size());
  auto [ps, cpu] = WithCpu(op_bytes, int64_t{W} * warmup,
                           [&] { return RunPsOps(op, clients, size / 4, warmup, duration); });
  if (!ps.ok()) return ps.status();
  Row r;
  r.name = name;
  r.bytes = size;
  r.value = GBps(op_bytes, *ps);
  r.p50_us = Percentile(ps->latencies, 0.5);
  r.p99_us = Percentile(ps->latencies, 0.99);
  r.cpu_us_per_mb = cpu;
  return r;
}

absl::StatusOr<std::vector<Row>> Transport() {
  RETURN_IF_ERROR(CheckTlsFlags());
  auto sizes = ParseList(absl::GetFlag(FLAGS_sizes), "sizes");
  if (!sizes.ok()) return sizes.status();
  const int S = absl::GetFlag(FLAGS_shards), W = absl::GetFlag(FLAGS_clients);
  const int warmup = absl::GetFlag(FLAGS_warmup);
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  if (S < 1 || W < 1) return absl::InvalidArgumentError("--shards and --clients must be >= 1");
  std::vector<Row> rows;
  for (int64_t size : *sizes) {
    if (size % 4 != 0) return absl::InvalidArgumentError("--sizes must be multiples of 4");
    const int64_t floats = size / 4;
    // Async shards: a push is applied at once and a pull never waits.
    ServerOptions so;
    so.shard.num_workers = W;
    so.shard.mode = Mode::kAsync;
    so.shard.optimizer.learning_rate = 1e-6f;
    std::vector<LocalServers> clusters;  // plaintext, then TLS
    for (bool tls : {false, true}) {
      if (tls && !absl::GetFlag(FLAGS_tls)) break;
      so.security = Security(tls);
      absl::StatusOr<LocalServers> cluster = LocalServers::Start(so, S);
      if (!cluster.ok()) return cluster.status();
      clusters.push_back(*std::move(cluster));
    }
    const ModelSpec spec = {{"payload", {floats}}};
    struct Case {
      const char* name;
      Op op;
      RawPattern raw;
      int64_t bytes;  // payload bytes moved per op
    };
    const Case cases[] = {{"push", Op::kPush, RawPattern::kSend, size},
                          {"pull", Op::kPull, RawPattern::kFetch, size},
                          {"push_pull", Op::kPushPull, RawPattern::kExchange, 2 * size}};
    std::vector<const Case*> chosen;
    for (absl::string_view op : absl::StrSplit(absl::GetFlag(FLAGS_ops), ',', absl::SkipWhitespace())) {
      auto it = std::find_if(std::begin(cases), std::end(cases),
                             [&](const Case& c) { return op == c.name; });
      if (it == std::end(cases)) {
        return absl::InvalidArgumentError(
            absl::StrCat("--ops: unknown operation '", op, "' (known: push, pull, push_pull)"));
      }
      chosen.push_back(it);
    }
    std::vector<OpTimings> raw;
    std::vector<double> raw_cpu;
    for (const Case* c : chosen) {
      auto [r, cpu] = WithCpu(c->bytes, int64_t{W} * warmup,
                              [&] { return RunRawTcp(c->raw, size, W, warmup, duration); });
      if (!r.ok()) return r.status();
      raw.push_back(*std::move(r));
      raw_cpu.push_back(cpu);
    }
    for (absl::string_view transport_name :
         absl::StrSplit(absl::GetFlag(FLAGS_transports), ',', absl::SkipWhitespace())) {
      auto transport = ParseTransport(transport_name);
      if (!transport.ok()) return transport.status();
      // clients[0] talk plaintext, clients[1] (with --tls) mutual TLS.
      std::vector<std::vector<std::unique_ptr<PsClient>>> clients(clusters.size());
      for (size_t k = 0; k < clusters.size(); ++k) {
        for (int w = 0; w < W; ++w) {
          ClientOptions co;
          co.servers = clusters[k].addresses;
          co.worker_id = w;
          co.num_workers = W;
          co.transport = *transport;
          co.security = Security(k == 1, w);
          auto c = PsClient::Connect(co);
          if (!c.ok()) return c.status();
          clients[k].push_back(*std::move(c));
        }
        TensorList init = {std::vector<float>(floats, 0.5f)};
        for (int w = 0; w < W; ++w) {
          absl::Status s = clients[k][w]->Init(spec, w == 0 ? &init : nullptr);
          if (!s.ok()) return s;
        }
      }
      for (size_t i = 0; i < chosen.size(); ++i) {
        const Case& c = *chosen[i];
        const std::string name = absl::StrCat(c.name, "/", transport_name);
        ASSIGN_OR_RETURN(Row r, MeasureOp(name, c.op, size, c.bytes, clients[0], warmup, duration));
        r.baseline = GBps(c.bytes, raw[i]);
        r.baseline_p50_us = Percentile(raw[i].latencies, 0.5);
        r.baseline_cpu_us_per_mb = raw_cpu[i];
        rows.push_back(r);
        if (clients.size() > 1) {
          // Baseline: the same operation in plaintext, just measured.
          ASSIGN_OR_RETURN(Row t, MeasureOp(absl::StrCat(name, "+tls"), c.op, size, c.bytes,
                                            clients[1], warmup, duration));
          t.baseline = r.value;
          t.baseline_p50_us = r.p50_us;
          t.baseline_cpu_us_per_mb = r.cpu_us_per_mb;
          rows.push_back(t);
        }
      }
    }
  }
  return rows;
}

// -------------------------------------------------------------------- apply

// The baseline: y += a * x, the same bytes as an SGD apply.
__attribute__((noinline)) void Axpy(float a, const float* x, float* y, size_t n) {
  for (size_t i = 0; i < n; ++i) y[i] += a * x[i];
}

absl::StatusOr<std::vector<Row>> Apply() {
  auto sizes = ParseList(absl::GetFlag(FLAGS_apply_elements), "apply_elements");
  if (!sizes.ok()) return sizes.status();
  const absl::Duration duration = absl::Seconds(absl::GetFlag(FLAGS_seconds));
  std::vector<Row> rows;
  for (int64_t n : *sizes) {
    std::vector<float> g(n, 1e-3f), w(n, 1.0f);
    auto opt = CreateOptimizer(OptimizerOptions{"sgd", 1e-3f}, n);
    if (!opt.ok()) return opt.status();
    // Rate of `f` in GB/s, counting 12 bytes per element: two reads, one write.
    auto rate = [&](const std::function<void()>& f) {
      f();  // warm up: page in
      int64_t reps = 0;
      const absl::Time start = absl::Now();
      absl::Time now = start;
      while (now - start < duration || reps < 3) {
        f();
        ++reps;
        now = absl::Now();
      }
      return 12.0 * n * reps / absl::ToDoubleSeconds(now - start) / 1e9;
    };
    const double axpy = rate([&] { Axpy(-1e-3f, g.data(), w.data(), n); });
    Row r;
    r.name = absl::StrCat((*opt)->name(), "_apply");  // the optimizer on one thread
    r.bytes = n;
    r.baseline = axpy;
    r.value = rate([&] { (*opt)->ApplyMean(/*step=*/1, {g.data()}, 0, n, w.data()); });
    rows.push_back(r);
    r.name = absl::StrCat((*opt)->name(), "_shard");  // as a shard applies: split over cores
    r.value = rate([&] { ApplyMeanInParallel(opt->get(), /*step=*/1, {g.data()}, n, w.data()); });
    rows.push_back(r);
  }
  return rows;
}

// -------------------------------------------------------------------- train

struct TrainRun {
  double samples_per_sec = 0;  // all workers together
  double accuracy = 0;
};

TrainerOptions TrainOptions(int worker_id, int workers, int batch) {
  TrainerOptions o;
  o.worker_id = worker_id;
  o.num_workers = workers;
  o.batch_size = batch;
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.log_every = 0;
  return o;
}

absl::StatusOr<TrainRun> Standalone(const FashionMnist& data) {
  auto r = RunWorker(TrainOptions(0, 1, 128), &data, {"cpu", 2}, nullptr,
                     static_cast<float>(absl::GetFlag(FLAGS_lr)));
  if (!r.ok()) return r.status();
  return TrainRun{r->samples_per_sec, r->test_accuracy};
}

// `fault_tolerant`: as ps_server and ps_worker run by default, with
// checkpoints every --checkpoint_every versions into a temporary folder.
absl::StatusOr<TrainRun> Distributed(const FashionMnist& data, Mode mode, bool fault_tolerant,
                                     bool tls) {
  constexpr int kWorkers = 2;
  ServerOptions so;
  so.security = Security(tls);
  so.shard.num_workers = kWorkers;
  so.shard.mode = mode;
  so.shard.optimizer.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
  std::string dir;
  if (fault_tolerant) {
    char tmpl[] = "/tmp/ps_bench_ckpt.XXXXXX";
    if (mkdtemp(tmpl) == nullptr) return absl::InternalError("cannot make a temporary folder");
    dir = tmpl;
    so.shard.worker_timeout = absl::Seconds(10);
    so.checkpoints.dir = dir;
    so.checkpoints.every_versions = absl::GetFlag(FLAGS_checkpoint_every);
  }
  absl::StatusOr<LocalServers> server = LocalServers::Start(so, 1);
  if (!server.ok()) return server.status();
  std::vector<absl::StatusOr<TrainResult>> results(kWorkers, absl::UnknownError("not run"));
  std::vector<std::thread> threads;
  for (int w = 0; w < kWorkers; ++w) {
    threads.emplace_back([&, w] {
      ClientOptions co;
      co.servers = server->addresses;
      co.worker_id = w;
      co.num_workers = kWorkers;
      co.security = Security(tls, w);
      if (fault_tolerant) co.retry_timeout = absl::Seconds(60);
      results[w] = RunWorker(TrainOptions(w, kWorkers, 64), &data, {"cpu", 1}, &co, 0);
    });
  }
  for (auto& t : threads) t.join();
  server->servers.clear();  // writes the final checkpoint
  if (!dir.empty()) std::filesystem::remove_all(dir);
  TrainRun run;
  for (int w = 0; w < kWorkers; ++w) {
    if (!results[w].ok()) return results[w].status();
    run.samples_per_sec += results[w]->samples_per_sec;
    if (!absl::GetFlag(FLAGS_json)) {
      std::printf("  %s worker %d: compute %.1f s, push-pull wait %.1f s\n",
                  ModeName(mode).c_str(), w, results[w]->compute_s, results[w]->comm_s);
    }
  }
  run.accuracy = results[0]->test_accuracy;
  return run;
}

absl::StatusOr<std::vector<Row>> Train() {
  RETURN_IF_ERROR(CheckTlsFlags());
  auto data = LoadFashionMnist(absl::GetFlag(FLAGS_dataset_dir));
  if (!data.ok()) return data.status();
  auto standalone = Standalone(*data);
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
  };
  std::vector<Config> configs = {{Mode::kSync, false, false}, {Mode::kAsync, false, false}};
  if (absl::GetFlag(FLAGS_checkpoint_every) > 0) configs.push_back({Mode::kSync, true, false});
  if (absl::GetFlag(FLAGS_tls)) {
    configs.push_back({Mode::kSync, false, true});
    configs.push_back({Mode::kAsync, false, true});
  }
  for (const Config& c : configs) {
    auto run = Distributed(*data, c.mode, c.fault_tolerant, c.tls);
    if (!run.ok()) return run.status();
    Row r;
    r.name = c.fault_tolerant
                 ? absl::StrCat("sync, fault tolerant (ckpt every ",
                                absl::GetFlag(FLAGS_checkpoint_every), ")")
                 : absl::StrCat(ModeName(c.mode), c.tls ? ", mutual TLS" : "",
                                " (1 server, 2 workers, batch 64 each)");
    r.value = run->samples_per_sec;
    r.baseline = standalone->samples_per_sec;
    r.accuracy = run->accuracy;
    rows.push_back(r);
  }
  return rows;
}

void PrintTable(const std::string& section, const std::vector<Row>& rows) {
  if (section == "transport") {
    // Rows against raw TCP, then (--tls) TLS rows against plaintext gRPC.
    for (bool tls : {false, true}) {
      std::vector<Row> part;
      for (const Row& r : rows) {
        if (absl::EndsWith(r.name, "+tls") == tls) part.push_back(r);
      }
      if (part.empty()) continue;
      const char* base = tls ? "plain" : "tcp";
      if (tls) std::printf("\nmutual TLS against plaintext gRPC (same run):\n");
      std::printf("%-20s %8s %10s %7s %7s %10s %10s %7s %9s %9s %9s\n", "op/transport", "payload",
                  "GB/s", base, "ratio", "p50 us", "p99 us", base, "cpu us/MB",
                  absl::StrCat(base, " cpu").c_str(), "cpu ratio");
      for (const Row& r : part) {
        std::printf("%-20s %8s %10.3f %7.3f %7.2f %10.1f %10.1f %7.1f %9.0f %9.0f %9.2f\n",
                    r.name.c_str(), HumanBytes(r.bytes).c_str(), r.value, r.baseline,
                    r.value / r.baseline, r.p50_us, r.p99_us, r.baseline_p50_us, r.cpu_us_per_mb,
                    r.baseline_cpu_us_per_mb, r.baseline_cpu_us_per_mb / r.cpu_us_per_mb);
      }
    }
  } else if (section == "apply") {
    std::printf("%-16s %12s %10s %10s %7s\n", "apply", "elements", "GB/s", "axpy GB/s",
                "ratio");
    for (const Row& r : rows) {
      std::printf("%-16s %12lld %10.2f %10.2f %7.2f\n", r.name.c_str(),
                  static_cast<long long>(r.bytes), r.value, r.baseline, r.value / r.baseline);
    }
  } else {
    std::printf("%-46s %10s %7s %9s\n", "configuration", "samples/s", "ratio", "accuracy");
    for (const Row& r : rows) {
      std::printf("%-46s %10.0f %7.2f %9.4f\n", r.name.c_str(), r.value, r.value / r.baseline,
                  r.accuracy);
    }
  }
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  absl::SetProgramUsageMessage(
      "Parameter-server benchmarks; every figure is a ratio of a baseline measured in the same "
      "run.\n  ps_bench transport [--sizes=...] [--shards=S] [--clients=W] [--seconds=T]\n"
      "  ps_bench apply [--apply_elements=...]\n  ps_bench train [--epochs=3]\n"
      "TLS cost: deploy/make_certs.sh DIR --servers=1 --workers=W, then add --tls "
      "--tls_dir=DIR to transport or train.\n"
      "Add --json for machine-readable output.");
  std::vector<char*> args = absl::ParseCommandLine(argc, argv);
  const std::string mode = args.size() == 2 ? args[1] : "";
  absl::StatusOr<std::vector<ps::Row>> rows;
  if (mode == "transport") {
    rows = ps::Transport();
  } else if (mode == "apply") {
    rows = ps::Apply();
  } else if (mode == "train") {
    rows = ps::Train();
  } else {
    std::cerr << "usage: ps_bench transport|apply|train [flags] (see --help)" << std::endl;
    return 2;
  }
  if (!rows.ok()) {
    std::cerr << "ps_bench: " << rows.status() << std::endl;
    return 1;
  }
  if (absl::GetFlag(FLAGS_json)) {
    std::cout << ps::Json(mode, *rows) << std::endl;
  } else {
    ps::PrintTable(mode, *rows);
  }
  return 0;
}
