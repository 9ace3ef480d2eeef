#include "tools/bench/bench_transport.h"

#include <sched.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <memory>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"
#include "common/status_macros.h"
#include "common/wire_dtype.h"
#include "tools/bench/bench_server_process.h"
#include "tools/bench/raw_tcp.h"
#include "tools/process/cpu_affinity.h"
#include "tools/process/local_servers.h"
#include "tools/process/proc.h"

namespace ps {
namespace {

enum class Op { kPush, kPull, kPushPull };

// Runs `op` on W clients against the cluster for about `duration`.
absl::StatusOr<OpTimings> RunPsOps(Op op, const std::vector<std::unique_ptr<PsClient>>& clients,
                                   int64_t floats, int warmup, absl::Duration duration) {
  const int W = static_cast<int>(clients.size());
  absl::Mutex mu;
  OpTimings result;
  absl::Status error;
  // From the first client's first timed op to the last one's last.
  absl::Time start = absl::InfiniteFuture(), end = absl::InfinitePast();
  auto* ready = new absl::Barrier(W);
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
      const absl::Time first = t, stop = t + duration;
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
      start = std::min(start, first);
      end = std::max(end, t);
    });
  }
  for (auto& t : threads) t.join();
  if (!error.ok()) return error;
  result.wall = end - start;
  return result;
}

double GBps(int64_t bytes_per_op, const OpTimings& t) {
  return double(bytes_per_op) * t.ops / absl::ToDoubleSeconds(t.wall) / 1e9;
}

// One transport row: `clients` run `op` on `floats`-element tensors; with
// `servers` (server processes), their CPU per MB too.
absl::StatusOr<Row> MeasureOp(const std::string& name, Op op, int64_t size, int64_t op_bytes,
                              const std::vector<std::unique_ptr<PsClient>>& clients,
                              int warmup, absl::Duration duration,
                              const BenchServerProcesses* servers = nullptr) {
  const int W = static_cast<int>(clients.size());
  double server_start = 0;
  if (servers != nullptr) {
    ASSIGN_OR_RETURN(server_start, servers->CpuSeconds());
  }
  auto [ps, cpu] = WithCpu(op_bytes, int64_t{W} * warmup,
                           [&] { return RunPsOps(op, clients, size / 4, warmup, duration); });
  if (!ps.ok()) return ps.status();
  Row r;
  if (servers != nullptr) {
    ASSIGN_OR_RETURN(const double server_end, servers->CpuSeconds());
    const double mb = double(op_bytes) * (ps->ops + int64_t{W} * warmup) / 1e6;
    r.server_cpu_us_per_mb = (server_end - server_start) * 1e6 / mb;
  }
  r.name = name;
  r.bytes = size;
  r.value = GBps(op_bytes, *ps);
  r.p50_us = Percentile(ps->latencies, 0.5);
  r.p99_us = Percentile(ps->latencies, 0.99);
  r.cpu_us_per_mb = cpu;
  return r;
}

// An operation of --ops and the raw TCP pattern that moves the same bytes.
struct OpCase {
  const char* name;
  Op op;
  RawPattern raw;
  int payloads;  // payloads moved per op
};
constexpr OpCase kOpCases[] = {{"push", Op::kPush, RawPattern::kSend, 1},
                               {"pull", Op::kPull, RawPattern::kFetch, 1},
                               {"push_pull", Op::kPushPull, RawPattern::kExchange, 2}};

absl::StatusOr<std::vector<const OpCase*>> ParseOps(const std::string& ops) {
  std::vector<const OpCase*> chosen;
  for (absl::string_view op : absl::StrSplit(ops, ',', absl::SkipWhitespace())) {
    auto it = std::find_if(std::begin(kOpCases), std::end(kOpCases),
                           [&](const OpCase& c) { return op == c.name; });
    if (it == std::end(kOpCases)) {
      return absl::InvalidArgumentError(
          absl::StrCat("--ops: unknown operation '", op, "' (known: push, pull, push_pull)"));
    }
    chosen.push_back(it);
  }
  return chosen;
}

// A private folder (mode 0700, as servers on unix sockets require) for the
// run's sockets, removed with the object (after the servers that used it).
class SocketFolder {
 public:
  static absl::StatusOr<std::unique_ptr<SocketFolder>> Make() {
    std::string path = "/tmp/ps-bench-XXXXXX";
    if (mkdtemp(path.data()) == nullptr) {
      return absl::InternalError(absl::StrCat("--unix: mkdtemp ", path, ": ",
                                              std::strerror(errno)));
    }
    return std::unique_ptr<SocketFolder>(new SocketFolder(std::move(path)));
  }
  ~SocketFolder() { rmdir(path_.c_str()); }
  SocketFolder(const SocketFolder&) = delete;
  SocketFolder& operator=(const SocketFolder&) = delete;
  const std::string& path() const { return path_; }

 private:
  explicit SocketFolder(std::string path) : path_(std::move(path)) {}
  std::string path_;
};


// W clients of `servers` on `transport`, the model initialized: one tensor
// of `floats` elements.
absl::StatusOr<std::vector<std::unique_ptr<PsClient>>> ConnectAll(
    const TransportBenchOptions& o, const std::vector<std::string>& servers, bool tls,
    ClientOptions::Transport transport, int64_t floats) {
  std::vector<std::unique_ptr<PsClient>> clients;
  for (int w = 0; w < o.clients; ++w) {
    ClientOptions co;
    co.servers = servers;
    co.worker_id = w;
    co.num_workers = o.clients;
    co.transport = transport;
    co.security = BenchSecurity(o.tls, tls, w);
    ASSIGN_OR_RETURN(std::unique_ptr<PsClient> c, PsClient::Connect(co));
    clients.push_back(std::move(c));
  }
  const ModelSpec spec = {{"payload", {floats}}};
  TensorList init = {std::vector<float>(floats, 0.5f)};
  for (int w = 0; w < o.clients; ++w) {
    RETURN_IF_ERROR(clients[w]->Init(spec, w == 0 ? &init : nullptr));
  }
  return clients;
}

// --server_process: for each size, plaintext and TLS ps_server processes
// pinned to --server_cpus, this process pinned to --client_cpus; a "+tls"
// row per operation and transport, its baseline plaintext, both measured
// against servers started alike.
absl::StatusOr<std::vector<Row>> RunPerSide(const TransportBenchOptions& o,
                                            const std::vector<int64_t>& sizes,
                                            const std::vector<const OpCase*>& chosen) {
  if (!o.tls.enabled) {
    return absl::InvalidArgumentError(
        "--server_process measures TLS per side: give --tls and --tls_dir");
  }
  if (o.unix_socket) return absl::InvalidArgumentError("--server_process does not take --unix");
  if (o.wire_dtypes != "f32") {
    return absl::InvalidArgumentError("--server_process measures --wire_dtype=f32 only");
  }
  std::optional<cpu_set_t> server_cpus, client_cpus;
  if (!o.server_cpus.empty()) {
    ASSIGN_OR_RETURN(server_cpus, ParseCpuList(o.server_cpus, "server_cpus"));
  }
  if (!o.client_cpus.empty()) {
    ASSIGN_OR_RETURN(client_cpus, ParseCpuList(o.client_cpus, "client_cpus"));
  }
  // Before any gRPC object: every thread gRPC starts inherits the mask.
  if (client_cpus) RETURN_IF_ERROR(PinCallingThread(*client_cpus, "client_cpus"));
  std::vector<Row> rows;
  for (int64_t size : sizes) {
    BenchServerProcessOptions so;
    so.binary = o.server_binary;
    so.shards = o.shards;
    so.num_workers = o.clients;
    so.cpus = server_cpus;
    ASSIGN_OR_RETURN(std::unique_ptr<BenchServerProcesses> plain, BenchServerProcesses::Start(so));
    so.security = BenchSecurity(o.tls, true);
    ASSIGN_OR_RETURN(std::unique_ptr<BenchServerProcesses> tls, BenchServerProcesses::Start(so));
    if (rows.empty()) {
      ASSIGN_OR_RETURN(const std::string server_cpus_now, tls->AllowedCpus());
      ASSIGN_OR_RETURN(const std::string client_cpus_now, ProcAllowedCpus(getpid()));
      std::fprintf(stderr, "ps_bench: ps_server processes on CPUs %s, clients on CPUs %s\n",
                   server_cpus_now.c_str(), client_cpus_now.c_str());
    }
    for (absl::string_view transport_name :
         absl::StrSplit(o.transports, ',', absl::SkipWhitespace())) {
      ASSIGN_OR_RETURN(const ClientOptions::Transport transport, ParseTransport(transport_name));
      ASSIGN_OR_RETURN(auto plain_clients,
                       ConnectAll(o, plain->addresses(), false, transport, size / 4));
      ASSIGN_OR_RETURN(auto tls_clients,
                       ConnectAll(o, tls->addresses(), true, transport, size / 4));
      for (const OpCase* c : chosen) {
        const int64_t op_bytes = size * c->payloads;
        const std::string name = absl::StrCat(c->name, "/", transport_name);
        ASSIGN_OR_RETURN(Row p, MeasureOp(name, c->op, size, op_bytes, plain_clients, o.warmup,
                                          o.duration, plain.get()));
        ASSIGN_OR_RETURN(Row t, MeasureOp(absl::StrCat(name, "+tls"), c->op, size, op_bytes,
                                          tls_clients, o.warmup, o.duration, tls.get()));
        t.baseline = p.value;
        t.baseline_p50_us = p.p50_us;
        t.baseline_cpu_us_per_mb = p.cpu_us_per_mb;
        t.baseline_server_cpu_us_per_mb = p.server_cpu_us_per_mb;
        rows.push_back(t);
      }
    }
  }
  return rows;
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunTransportBench(const TransportBenchOptions& o) {
  RETURN_IF_ERROR(CheckBenchTls(o.tls));
  auto sizes = ParseNonEmptyList(o.sizes, "sizes");
  if (!sizes.ok()) return sizes.status();
  const int S = o.shards, W = o.clients;
  const int warmup = o.warmup;
  const absl::Duration duration = o.duration;
  if (S < 1 || W < 1) return absl::InvalidArgumentError("--shards and --clients must be >= 1");
  std::unique_ptr<SocketFolder> sockets;  // outlives every cluster below
  if (o.unix_socket) {
    ASSIGN_OR_RETURN(sockets, SocketFolder::Make());
  }
  ASSIGN_OR_RETURN(const std::vector<const OpCase*> chosen, ParseOps(o.ops));
  for (int64_t size : *sizes) {
    if (size % 4 != 0) return absl::InvalidArgumentError("--sizes must be multiples of 4");
  }
  if (o.server_process) return RunPerSide(o, *sizes, chosen);
  std::vector<Row> rows;
  for (int64_t size : *sizes) {
    const int64_t floats = size / 4;
    // Async shards: a push is applied at once and a pull never waits.
    ServerOptions so;
    so.shard.num_workers = W;
    so.shard.mode = Mode::kAsync;
    so.shard.optimizer.learning_rate = 1e-6f;
    // Plaintext on loopback TCP, then what is asked of TLS and unix sockets.
    enum class Kind { kPlain, kTls, kUnix };
    std::vector<Kind> kinds = {Kind::kPlain};
    if (o.tls.enabled) kinds.push_back(Kind::kTls);
    if (o.unix_socket) kinds.push_back(Kind::kUnix);
    std::vector<LocalServers> clusters;  // one per kind
    for (Kind kind : kinds) {
      so.security = BenchSecurity(o.tls, kind == Kind::kTls);
      absl::StatusOr<LocalServers> cluster =
          LocalServers::Start(so, S, kind == Kind::kUnix ? sockets->path() : std::string());
      if (!cluster.ok()) return cluster.status();
      clusters.push_back(*std::move(cluster));
    }
    const ModelSpec spec = {{"payload", {floats}}};
    std::vector<OpTimings> raw;
    std::vector<double> raw_cpu;
    for (const OpCase* c : chosen) {
      auto [r, cpu] = WithCpu(size * c->payloads, int64_t{W} * warmup,
                              [&] { return RunRawTcp(c->raw, size, W, warmup, duration); });
      if (!r.ok()) return r.status();
      raw.push_back(*std::move(r));
      raw_cpu.push_back(cpu);
    }
    for (absl::string_view transport_name :
         absl::StrSplit(o.transports, ',', absl::SkipWhitespace())) {
      auto transport = ParseTransport(transport_name);
      if (!transport.ok()) return transport.status();
      std::vector<std::optional<Row>> f32_rows(chosen.size());  // baselines of the bf16 rows
      for (absl::string_view dtype_name :
           absl::StrSplit(o.wire_dtypes, ',', absl::SkipWhitespace())) {
        auto dtype = ParseWireDtype(dtype_name);
        if (!dtype.ok()) {
          return absl::InvalidArgumentError(
              absl::StrCat("--wire_dtype: ", dtype.status().message()));
        }
        const std::string suffix = *dtype == WireDtype::kF32 ? "" : "+bf16";
        // clients[k] talk to clusters[k], as kinds[k] says.
        std::vector<std::vector<std::unique_ptr<PsClient>>> clients(clusters.size());
        for (size_t k = 0; k < clusters.size(); ++k) {
          for (int w = 0; w < W; ++w) {
            ClientOptions co;
            co.servers = clusters[k].addresses;
            co.worker_id = w;
            co.num_workers = W;
            co.transport = *transport;
            co.wire_dtype = *dtype;
            co.security = BenchSecurity(o.tls, kinds[k] == Kind::kTls, w);
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
          const OpCase& c = *chosen[i];
          const int64_t op_bytes = size * c.payloads;
          const std::string name = absl::StrCat(c.name, "/", transport_name, suffix);
          ASSIGN_OR_RETURN(Row r,
                           MeasureOp(name, c.op, size, op_bytes, clients[0], warmup, duration));
          if (*dtype != WireDtype::kF32 && f32_rows[i].has_value()) {
            // Baseline: the same operation on the f32 wire, just measured.
            r.baseline = f32_rows[i]->value;
            r.baseline_p50_us = f32_rows[i]->p50_us;
            r.baseline_cpu_us_per_mb = f32_rows[i]->cpu_us_per_mb;
          } else {
            r.baseline = GBps(op_bytes, raw[i]);
            r.baseline_p50_us = Percentile(raw[i].latencies, 0.5);
            r.baseline_cpu_us_per_mb = raw_cpu[i];
          }
          if (*dtype == WireDtype::kF32) f32_rows[i] = r;
          rows.push_back(r);
          for (size_t k = 1; k < clients.size(); ++k) {
            // Baseline: the same operation in plaintext on TCP, just measured.
            const char* kind = kinds[k] == Kind::kTls ? "+tls" : "+unix";
            ASSIGN_OR_RETURN(Row t, MeasureOp(absl::StrCat(name, kind), c.op, size, op_bytes,
                                              clients[k], warmup, duration));
            t.baseline = r.value;
            t.baseline_p50_us = r.p50_us;
            t.baseline_cpu_us_per_mb = r.cpu_us_per_mb;
            rows.push_back(t);
          }
        }
      }
    }
  }
  return rows;
}

}  // namespace ps
