#include "tools/bench/bench_rows_cold.h"

#include <fcntl.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <memory>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "httplib.h"
#include "tools/bench/bench_server_process.h"
#include "tools/process/child_process.h"
#include "tools/process/proc.h"

namespace ps {
namespace {

// Longest a client may take between two lines (connect and create its
// share of a million rows; one figure's warm-up or timed phase).
constexpr absl::Duration kLineTimeout = absl::Minutes(5);

struct Figure {
  double rows_per_s = 0;          // all clients
  double p50_us = 0, p99_us = 0;  // client 0's
};

// What a cell's servers say of their tier, with a budget.
struct TierFigures {
  double lookups[3] = {0, 0, 0};  // memory, disk, none
  double disk_rows = 0;
  int64_t peak_rss = 0;
};

// The tier's counters on the servers' /metrics, and their peak RSS.
absl::StatusOr<TierFigures> ReadTier(const BenchServerProcesses& servers) {
  TierFigures t;
  ASSIGN_OR_RETURN(const std::vector<std::string> addresses, servers.MetricsAddresses());
  const std::string lookups = "ps_server_embedding_lookups_total{table=\"rows\",where=\"";
  const std::string disk = "ps_server_embedding_disk_rows{table=\"rows\"} ";
  for (const std::string& address : addresses) {
    httplib::Client client("http://" + address);
    httplib::Result r = client.Get("/metrics");
    if (!r || r->status != 200) {
      return absl::UnavailableError(absl::StrCat("no /metrics from ", address));
    }
    for (absl::string_view line : absl::StrSplit(r->body, '\n')) {
      double v = 0;
      absl::string_view rest = line;
      if (absl::ConsumePrefix(&rest, disk) && absl::SimpleAtod(rest, &v)) t.disk_rows += v;
      rest = line;
      if (!absl::ConsumePrefix(&rest, lookups)) continue;
      const char* where[] = {"memory\"} ", "disk\"} ", "none\"} "};
      for (int i = 0; i < 3; ++i) {
        absl::string_view value = rest;
        if (absl::ConsumePrefix(&value, where[i]) && absl::SimpleAtod(value, &v)) {
          t.lookups[i] += v;
        }
      }
    }
  }
  ASSIGN_OR_RETURN(t.peak_rss, servers.PeakRssBytes());
  return t;
}

absl::Status CheckOptions(const ColdRowsBenchOptions& o) {
  for (int64_t k : o.ks) {
    if (k < 1) return absl::InvalidArgumentError("--sparse_ids: each must be >= 1");
  }
  for (int64_t d : o.dims) {
    if (d < 1 || d > 65536) return absl::InvalidArgumentError("--dims: each in [1, 65536]");
  }
  for (const std::string& s : o.sockets) {
    if (s != "tcp" && s != "unix") {
      return absl::InvalidArgumentError(absl::StrCat("--sockets: unknown '", s, "' (tcp, unix)"));
    }
  }
  if (o.shards < 1) return absl::InvalidArgumentError("--sparse_shards must be >= 1");
  if (o.clients < 1) return absl::InvalidArgumentError("--sparse_clients must be >= 1");
  if (!(o.lr > 0)) return absl::InvalidArgumentError("--sparse_lr must be > 0");
  if (o.table_budget < 0) return absl::InvalidArgumentError("--sparse_table_budget must be >= 0");
  if (o.parallel_ids < -1) return absl::InvalidArgumentError("--sparse_parallel_ids must be >= -1");
  if (o.duration <= absl::ZeroDuration() || o.warmup < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--seconds must be > 0 and --warmup_seconds >= 0");
  }
  return absl::OkStatus();
}

// The next line of `c`, or why there is none.
absl::StatusOr<std::string> NextLine(ChildProcess& c, int client) {
  std::optional<std::string> line = c.ReadLine(absl::Now() + kLineTimeout);
  if (!line) {
    return absl::UnavailableError(absl::StrCat(
        "rows client ", client, c.timed_out() ? " said nothing for " : " exited; ",
        c.timed_out() ? absl::FormatDuration(kLineTimeout) : "", " its log:\n", c.LogTail(15)));
  }
  if (absl::StartsWith(*line, "error ")) {
    return absl::UnavailableError(absl::StrCat("rows client ", client, ": ", line->substr(6)));
  }
  return *line;
}

// Waits for a line starting with `word` from every client.
absl::StatusOr<std::vector<std::string>> AllSay(std::vector<std::unique_ptr<ChildProcess>>& clients,
                                                absl::string_view word) {
  std::vector<std::string> lines;
  for (size_t w = 0; w < clients.size(); ++w) {
    ASSIGN_OR_RETURN(std::string line, NextLine(*clients[w], w));
    if (!absl::StartsWith(line, word)) {
      return absl::InternalError(
          absl::StrCat("rows client ", w, ": expected '", word, "', got '", line, "'"));
    }
    lines.push_back(std::move(line));
  }
  return lines;
}

// The write ends of the clients' go FIFOs.
struct GoFifos {
  std::vector<int> fds;
  ~GoFifos() {
    for (int fd : fds) close(fd);
  }
  // A go byte to every client.
  absl::Status Go() {
    for (int fd : fds) {
      if (write(fd, "g", 1) != 1) return absl::InternalError("cannot write a client's go FIFO");
    }
    return absl::OkStatus();
  }
};

// One cell: servers, clients, every operation. With a budget, `tier_note`
// says what the tier did over the cell (all operations).
absl::StatusOr<std::map<std::string, Figure>> RunCell(const ColdRowsBenchOptions& o,
                                                      const std::string& exe,
                                                      const std::string& dist, int64_t k,
                                                      int64_t dim, bool unix_socket,
                                                      std::string* tier_note) {
  BenchServerProcessOptions so;
  so.binary = o.server_binary;
  so.shards = o.shards;
  so.num_workers = o.clients;
  so.unix_socket = unix_socket;
  so.flags = {"--sparse_optimizer=sgd", absl::StrCat("--sparse_lr=", o.lr),
              absl::StrCat("--max_ids_per_request=", std::max<int64_t>(k, 4096))};
  if (o.parallel_ids >= 0) {
    so.flags.push_back(absl::StrCat("--table_parallel_ids=", o.parallel_ids));
  }
  ASSIGN_OR_RETURN(const TempDir tier, TempDir::Make("ps_bench_tier"));
  if (o.table_budget > 0) {
    so.flags.push_back(absl::StrCat("--table_memory_budget=", o.table_budget));
    so.flags.push_back(absl::StrCat("--table_dir=", tier.path));
    so.flags.push_back("--metrics_listen=127.0.0.1:0");
  }
  ASSIGN_OR_RETURN(std::unique_ptr<BenchServerProcesses> servers, BenchServerProcesses::Start(so));
  ASSIGN_OR_RETURN(const TempDir temp, TempDir::Make("ps_bench_rows"));
  const std::string& dir = temp.path;
  std::vector<std::unique_ptr<ChildProcess>> clients;  // stopped before `temp` goes
  for (int w = 0; w < o.clients; ++w) {
    const std::string fifo = absl::StrCat(dir, "/go-", w);
    if (mkfifo(fifo.c_str(), 0600) != 0) return absl::InternalError("cannot make a FIFO");
    std::vector<std::string> argv = {
        exe,
        "sparse",
        absl::StrCat("--rows_client=", w),
        absl::StrCat("--rows_servers=", absl::StrJoin(servers->addresses(), ",")),
        absl::StrCat("--rows_go_fifo=", fifo),
        absl::StrCat("--sparse_clients=", o.clients),
        absl::StrCat("--rows_transport=", o.transport),
        absl::StrCat("--sparse_ids=", k),
        absl::StrCat("--dims=", dim),
        absl::StrCat("--dists=", dist),
        absl::StrCat("--ops=", absl::StrJoin(o.ops, ",")),
        absl::StrCat("--pool_rows=", o.pool_rows),
        absl::StrCat("--id_space=", o.id_space),
        absl::StrCat("--zipf_s=", o.zipf_s),
        absl::StrCat("--warmup_seconds=", absl::ToDoubleSeconds(o.warmup)),
        absl::StrCat("--seconds=", absl::ToDoubleSeconds(o.duration))};
    ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> c,
                     ChildProcess::Spawn(argv, absl::StrCat(dir, "/client-", w, ".log"), true));
    clients.push_back(std::move(c));
  }
  std::map<std::string, Figure> figures;
  GoFifos go;
  absl::Status s = [&]() -> absl::Status {
    ASSIGN_OR_RETURN(const std::vector<std::string> ready, AllSay(clients, "ready"));
    // Each client holds its FIFO open (it said ready), so these opens return at once.
    for (int w = 0; w < o.clients; ++w) {
      const int fd = open(absl::StrCat(dir, "/go-", w).c_str(), O_WRONLY | O_NONBLOCK | O_CLOEXEC);
      if (fd < 0) return absl::InternalError(absl::StrCat("cannot open client ", w, "'s FIFO"));
      go.fds.push_back(fd);
    }
    std::fprintf(stderr, "ps_bench: %s K=%lld dim=%lld %s: %s\n", dist.c_str(),
                 static_cast<long long>(k), static_cast<long long>(dim),
                 unix_socket ? "unix" : "tcp",
                 absl::StrCat("working set ", ready[0].substr(6), " (distinct rows, draws/request)")
                     .c_str());
    for (const std::string& op : o.ops) {
      RETURN_IF_ERROR(go.Go());
      RETURN_IF_ERROR(AllSay(clients, "warm").status());
      RETURN_IF_ERROR(go.Go());
      ASSIGN_OR_RETURN(const std::vector<std::string> results, AllSay(clients, "result"));
      Figure f;
      for (size_t w = 0; w < results.size(); ++w) {
        const std::vector<std::string> v = absl::StrSplit(results[w], ' ');
        double ops = 0, secs = 0, p50 = 0, p99 = 0;
        if (v.size() != 6 || v[1] != op || !absl::SimpleAtod(v[2], &ops) ||
            !absl::SimpleAtod(v[3], &secs) || !absl::SimpleAtod(v[4], &p50) ||
            !absl::SimpleAtod(v[5], &p99) || secs <= 0) {
          return absl::InternalError(
              absl::StrCat("rows client ", w, ": bad result line '", results[w], "'"));
        }
        f.rows_per_s += ops * k / secs;
        if (w == 0) f.p50_us = p50, f.p99_us = p99;
      }
      figures[op] = f;
    }
    if (o.table_budget > 0) {
      ASSIGN_OR_RETURN(const TierFigures t, ReadTier(*servers));
      const double all = t.lookups[0] + t.lookups[1] + t.lookups[2];
      *tier_note = absl::StrFormat(
          "; budget %.1f MiB: hit rate %.1f%% (disk %.1f%%, new %.1f%%), %.0f rows on disk, "
          "server peak RSS %.1f MiB",
          static_cast<double>(o.table_budget) / (1 << 20), all > 0 ? 100 * t.lookups[0] / all : 0,
          all > 0 ? 100 * t.lookups[1] / all : 0, all > 0 ? 100 * t.lookups[2] / all : 0,
          t.disk_rows, static_cast<double>(t.peak_rss) / (1 << 20));
      std::fprintf(stderr, "ps_bench: %s K=%lld dim=%lld%s\n", dist.c_str(),
                   static_cast<long long>(k), static_cast<long long>(dim), tier_note->c_str());
    }
    for (size_t w = 0; w < clients.size(); ++w) {
      const std::optional<int> status = clients[w]->Wait(absl::Now() + kLineTimeout);
      if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
        return absl::UnavailableError(
            absl::StrCat("rows client ", w, " did not exit cleanly:\n", clients[w]->LogTail(15)));
      }
    }
    return absl::OkStatus();
  }();
  clients.clear();
  if (!s.ok()) return s;
  return figures;
}

// ps-lite's figures for the same workload, by "dist K dim op" (op as ours
// names it), from one run of its driver.
absl::StatusOr<std::map<std::string, double>> RunPsLite(const ColdRowsBenchOptions& o) {
  ASSIGN_OR_RETURN(const TempDir temp, TempDir::Make("ps_bench_pslite"));
  const std::string& dir = temp.path;
  std::vector<std::string> ops;
  for (const std::string& op : o.ops) ops.push_back(op == "push_pull" ? "pushpull" : op);
  const std::vector<std::string> argv = {o.pslite_bench,
                                         "--runs",
                                         "1",
                                         "--outdir",
                                         dir,
                                         "--ks",
                                         absl::StrJoin(o.ks, ","),
                                         "--dims",
                                         absl::StrJoin(o.dims, ","),
                                         "--dists",
                                         absl::StrJoin(o.dists, ","),
                                         "--ops",
                                         absl::StrJoin(ops, ","),
                                         "--seconds",
                                         absl::StrCat(absl::ToDoubleSeconds(o.duration)),
                                         "--warmup",
                                         absl::StrCat(absl::ToDoubleSeconds(o.warmup)),
                                         "--id-space",
                                         absl::StrCat(o.id_space),
                                         "--zipf-s",
                                         absl::StrCat(o.zipf_s),
                                         "--pool-keys",
                                         absl::StrCat(o.pool_rows)};
  std::fprintf(stderr, "ps_bench: ps-lite's driver: %s\n", absl::StrJoin(argv, " ").c_str());
  ASSIGN_OR_RETURN(std::unique_ptr<ChildProcess> c,
                   ChildProcess::Spawn(argv, dir + "/pslite.log", false));
  const std::optional<int> status = c->Wait(absl::Now() + absl::Hours(1));
  if (!status || !WIFEXITED(*status) || WEXITSTATUS(*status) != 0) {
    return absl::UnavailableError(absl::StrCat("ps-lite's driver failed:\n", c->LogTail(20)));
  }
  std::ifstream csv(dir + "/run1.csv");
  std::map<std::string, double> mrows;
  std::string line;
  std::getline(csv, line);  // header: dist,K,dim,op,ops,secs,ops_per_s,rows_per_s,...
  while (std::getline(csv, line)) {
    const std::vector<std::string> f = absl::StrSplit(line, ',');
    double rows_per_s = 0;
    if (f.size() < 8 || !absl::SimpleAtod(f[7], &rows_per_s)) {
      return absl::DataLossError(absl::StrCat("ps-lite's CSV: bad line '", line, "'"));
    }
    const std::string op = f[3] == "pushpull" ? "push_pull" : f[3];
    mrows[absl::StrCat(f[0], " ", f[1], " ", f[2], " ", op)] = rows_per_s / 1e6;
  }
  return mrows;
}

}  // namespace

absl::StatusOr<std::vector<Row>> RunColdRowsBench(const ColdRowsBenchOptions& o) {
  RETURN_IF_ERROR(CheckOptions(o));
  ASSIGN_OR_RETURN(const std::string exe, SelfExecutable());
  std::map<std::string, double> pslite;
  if (!o.pslite_bench.empty()) {
    ASSIGN_OR_RETURN(pslite, RunPsLite(o));
  }
  std::vector<Row> rows;
  for (const std::string& dist : o.dists) {
    for (int64_t k : o.ks) {
      for (int64_t dim : o.dims) {
        for (const std::string& socket : o.sockets) {
          std::string tier_note;
          ASSIGN_OR_RETURN(const auto figures,
                           RunCell(o, exe, dist, k, dim, socket == "unix", &tier_note));
          for (const std::string& op : o.ops) {
            const Figure& f = figures.at(op);
            Row r;
            r.name = absl::StrCat(op, " ", dist, " d", dim, " ", socket, tier_note);
            r.ids = k;
            r.bytes = k * dim * 4;
            r.rows_per_s = f.rows_per_s;
            r.value = f.rows_per_s / 1e6;
            const auto it = pslite.find(absl::StrCat(dist, " ", k, " ", dim, " ", op));
            r.baseline = it == pslite.end() ? 0 : it->second;
            r.p50_us = f.p50_us;
            r.p99_us = f.p99_us;
            rows.push_back(r);
          }
        }
      }
    }
  }
  return rows;
}

}  // namespace ps
