// ps_bench: measures the parameter server against baselines taken in the same
// run, and prints every figure as a ratio of its baseline.
//
//   ps_bench transport   push / pull / push-pull throughput and latency over
//                        real gRPC shards, against raw loopback TCP
//                        (tools/bench/bench_transport.h)
//   ps_bench apply       the optimizer's apply rate, against a plain axpy loop
//                        (tools/bench/bench_apply.h)
//   ps_bench train --model=ctr  the CTR model: standalone, then 1 and 2
//                        servers with 2 workers, sync and async
//                        (tools/bench/bench_ctr_train.h)
//   ps_bench train       Fashion-MNIST MLP: standalone, then 1 server and 2
//                        workers in sync and in async mode (tools/bench/bench_train.h);
//                        --processes: again as real ps_server and ps_worker
//                        processes (tools/bench/train_processes.h)
//   ps_bench sparse      embedding rows by id: pull / push / push-pull rows/s
//                        and GB/s, against the dense path moving the same
//                        bytes (tools/bench/bench_sparse.h)
//   ps_bench consistency time to accuracy of each consistency mode and
//                        optimizer with a straggler, real ps_server and
//                        ps_worker processes (tools/bench/bench_consistency.h)
//
// Human-readable tables by default; --json prints one JSON object instead.
#include <sys/wait.h>
#include <unistd.h>

#include <climits>
#include <cstdlib>
#include <iostream>
#include <optional>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "common/allocator.h"
#include "common/command_line.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_apply.h"
#include "tools/bench/bench_common.h"
#include "tools/bench/bench_consistency.h"
#include "tools/bench/bench_ctr_train.h"
#include "tools/bench/bench_sparse.h"
#include "tools/bench/bench_train.h"
#include "tools/bench/bench_transport.h"
#include "tools/process/child_process.h"
#include "worker/mlp/dataset.h"

ABSL_FLAG(std::string, sizes, "4096,65536,1048576,4194304,16777216,67108864",
          "transport: payload sizes in bytes (multiples of 4).");
ABSL_FLAG(int, shards, 1, "transport: number of in-process server shards (S).");
ABSL_FLAG(std::string, ops, "push,pull,push_pull", "transport, sparse: operations to measure.");
ABSL_FLAG(std::string, sparse_ids, "1000,10000,100000",
          "sparse: ids per request (each size is a cluster of its own).");
ABSL_FLAG(std::string, dims, "16,64", "sparse: row dims of the table.");
ABSL_FLAG(std::string, dists, "uniform,zipf",
          "sparse: id distributions: uniform over --vocab, zipf (s = 1.1) over --vocab.");
ABSL_FLAG(int, sparse_shards, 2, "sparse: number of in-process server shards.");
ABSL_FLAG(int64_t, vocab, 1000000, "sparse: ids are drawn from [0, vocab).");
ABSL_FLAG(int, clients, 1, "transport: number of client threads (W), one connection each.");
ABSL_FLAG(double, seconds, 1.0, "transport, apply, sparse: seconds to measure each figure.");
ABSL_FLAG(int, warmup, 3,
          "transport, sparse: untimed operations per client (sparse: per figure) before "
          "measuring.");
ABSL_FLAG(std::string, transports, "stream,unary",
          "transport: client transports to measure (stream and/or unary).");
ABSL_FLAG(std::string, wire_dtype, "f32",
          "transport: wire dtypes to measure (f32 and/or bf16, e.g. f32,bf16); a bf16 row's "
          "baseline is the f32 row of the same operation and transport.");
ABSL_FLAG(std::string, apply_elements, "1048576,16777216",
          "apply: shard sizes in float32 elements.");
ABSL_FLAG(int, epochs, 3, "train: epochs for each configuration.");
ABSL_FLAG(std::string, model, "mlp",
          "train: mlp (Fashion-MNIST) or ctr (the CTR model on embedding tables, synthetic "
          "data: standalone, then 1 and 2 servers with 2 workers, sync and async; "
          "tools/bench/bench_ctr_train.h; --max_steps steps per worker, 0 = 2000).");
ABSL_FLAG(double, ctr_dense_lr, 1e-3, "train --model=ctr: Adam's learning rate for the MLP.");
ABSL_FLAG(int, ctr_batch, 128, "train --model=ctr: examples per step per worker.");
ABSL_FLAG(uint64_t, ctr_vocab, 1000000, "train --model=ctr: generator ids per feature.");
ABSL_FLAG(int, ctr_eval_examples, 10000,
          "train --model=ctr: held-out examples of worker 0's AUC.");
ABSL_FLAG(int64_t, max_steps, 0, "train: stop each configuration after this many steps (0 = all).");
ABSL_FLAG(double, lr, 0.1, "train: learning rate.");
ABSL_FLAG(int64_t, checkpoint_every, 100,
          "train: the \"sync, fault tolerant\" row's checkpoint interval, in versions (its "
          "server also holds 10 s worker leases, its workers keep a copy for restores and "
          "send heartbeats). 0 = leave that row out.");
ABSL_FLAG(double, scrape_every, 0,
          "train: seconds; > 0 adds a sync row with /metrics on the server and the workers, "
          "each scraped this often, against the plain sync row of the same run (what "
          "scraping costs), run plain, scraped, scraped, plain. 0 = no such row.");
ABSL_FLAG(bool, processes, false,
          "train: also run sync and async as the real binaries, one ps_server and 2 ps_worker "
          "processes (the in-process rows' batch, threads, epochs, --max_steps and --lr), on "
          "each of --process_sockets; figures from the workers' --metrics_file.");
ABSL_FLAG(std::string, process_sockets, "unix,tcp",
          "train --processes: unix (a socket in a 0700 folder under /tmp, as "
          "deploy/local_cluster.sh) and/or tcp (127.0.0.1, plaintext).");
ABSL_FLAG(std::string, dataset_dir, ps::kDefaultDatasetDir,
          "train, consistency: Fashion-MNIST folder.");
ABSL_FLAG(bool, json, false,
          "transport, apply, train: print one JSON object instead of tables (consistency: "
          "--csv).");
ABSL_FLAG(bool, tls, false,
          "transport: also measure each operation over mutual TLS, against plaintext in the "
          "same run; train: add TLS runs. Needs --tls_dir.");
ABSL_FLAG(bool, unix, false,
          "transport: also measure each operation over unix sockets (a 0700 folder under "
          "/tmp), against plaintext loopback TCP in the same run (\"+unix\" rows).");
ABSL_FLAG(bool, server_process, false,
          "transport (with --tls): TLS per side: the shards as real ps_server processes "
          "(--server_binary) pinned to --server_cpus, the clients pinned to --client_cpus; each "
          "side's CPU us/MB, TLS against plaintext.");
ABSL_FLAG(std::string, server_cpus, "",
          "transport --server_process: CPUs of the ps_server processes, as taskset -c takes "
          "them (e.g. 0 or 0-3); empty: not pinned.");
ABSL_FLAG(std::string, client_cpus, "",
          "transport --server_process: CPUs of this process (the clients), pinned before any "
          "gRPC object exists; empty: not pinned.");
ABSL_FLAG(std::string, tls_dir, "",
          "With --tls: certificates from deploy/make_certs.sh DIR --servers=1 --workers=W (the "
          "shards share server-0's certificate; client w uses worker-w's).");

ABSL_FLAG(std::string, modes, "sync,sync_q3,ssp1,ssp3,async,async_inverse",
          "consistency: the rows' modes, in order: sync; sync_q3 (sync --sync_quorum=3: the "
          "straggler is a backup worker); ssp1, ssp3 (--mode=ssp --staleness=1 or 3); async; "
          "async_inverse (async --staleness_lr=inverse).");
ABSL_FLAG(std::string, optimizers, "sgd:0.1,adam:0.001",
          "consistency: NAME:LR pairs; each mode runs once with each (ps_server "
          "--optimizer=NAME --lr=LR; a ps_server without --optimizer runs sgd rows without it).");
ABSL_FLAG(double, target_accuracy, 0.85, "consistency: the test accuracy to time.");
ABSL_FLAG(bool, stop_at_target, true,
          "consistency: end a row once worker 0 measures --target_accuracy; false: run each row "
          "to --step_limit (final accuracies at equal steps).");
ABSL_FLAG(int64_t, step_limit, 1500,
          "consistency: each worker's step limit (ps_worker --max_steps); 234 steps are an "
          "epoch with 4 workers of batch 64.");
ABSL_FLAG(int64_t, eval_every, 20,
          "consistency: worker 0 evaluates the test set every this many of its steps.");
ABSL_FLAG(double, straggler_slowdown, 2,
          "consistency: the last worker's ps_worker --slowdown (after each step it sleeps this "
          "many times its usual step: 2 = 3x slower). 0 = no straggler.");
ABSL_FLAG(std::string, straggler_slowdown_of, "step",
          "consistency: the stragglers' ps_worker --slowdown_of: step (the whole step, "
          "push-pull included) or compute (forward and backward only: less than 3x slower "
          "when a step is mostly communication).");
ABSL_FLAG(std::string, straggler, "fixed",
          "consistency: fixed (the last worker is slow at every step) or rotating (every "
          "worker is slow, by --straggler_slowdown, on every 4th of its steps, in turn: "
          "one straggler per step, a different one each time).");
ABSL_FLAG(double, row_timeout, 900,
          "consistency, train --processes: seconds before a row is cut off.");
ABSL_FLAG(int, repeats, 1,
          "consistency: runs of every row (all rows' first run, then all rows' second, ...); "
          "the table shows medians and each run's time. train: rounds of plain, scraped, "
          "scraped, plain for the --scrape_every row, which shows the means.");
ABSL_FLAG(bool, quick, false,
          "consistency: a few steps per row (--step_limit=30 --eval_every=10), for smoke tests.");
ABSL_FLAG(std::string, csv, "",
          "consistency: write every evaluation (mode,optimizer,lr,run,t_s,step,test_accuracy) to "
          "this file; default: --png's path with .csv, else none.");
ABSL_FLAG(std::string, png, "",
          "consistency: draw test accuracy against wall time, one line per row, to this PNG "
          "(tools/bench/plot_consistency.py, /usr/bin/python3 with Debian's python3-matplotlib).");
ABSL_FLAG(
    std::string, log_dir, "",
    "consistency: folder for the processes' logs; default: a new /tmp/ps_bench_consistency.*");
ABSL_FLAG(std::string, server_binary, "",
          "consistency, train --processes, transport --server_process: ps_server to run; "
          "default: the one built beside "
          "ps_bench.");
ABSL_FLAG(std::string, worker_binary, "",
          "consistency, train --processes: ps_worker to run; default: the one built beside "
          "ps_bench.");

namespace {

// `rel` (a path in this workspace, e.g. "server/ps_server") from ps_bench's
// runfiles, from bazel-bin, beside ps_bench (a bundle's bin/), or from the
// working directory.
std::string FindRunfile(const std::string& rel) {
  std::vector<std::string> candidates;
  if (const char* dir = std::getenv("RUNFILES_DIR")) {
    candidates.push_back(absl::StrCat(dir, "/ps/", rel));
  }
  char self[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
  if (n > 0) {
    const std::string exe(self, n);
    candidates.push_back(absl::StrCat(exe, ".runfiles/ps/", rel));
    const std::string bin = exe.substr(0, exe.rfind('/'));  // .../bin/tools
    candidates.push_back(absl::StrCat(bin.substr(0, bin.rfind('/')), "/", rel));
    // A deploy/bundle.sh bundle: every binary in one bin/ folder.
    candidates.push_back(absl::StrCat(bin, rel.substr(rel.rfind('/'))));
  }
  candidates.push_back(rel);
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return rel;
}

// Renders the CSV at `csv` into `png`; the plotter's log goes to `log`.
absl::Status Plot(const std::string& csv, const std::string& png, double target,
                  const std::string& title, const std::string& log) {
  const std::string script = FindRunfile("tools/bench/plot_consistency.py");
  auto p =
      ps::ChildProcess::Spawn({"/usr/bin/python3", script, csv, png,
                               absl::StrCat("--target=", target), absl::StrCat("--title=", title)},
                              log, false);
  if (!p.ok()) return p.status();
  const std::optional<int> st = (*p)->Wait(absl::Now() + absl::Minutes(2));
  if (!st || !WIFEXITED(*st) || WEXITSTATUS(*st) != 0) {
    return absl::InternalError(
        absl::StrCat(script, " ", ps::DescribeExit(st), ":\n", (*p)->LogTail(10)));
  }
  return absl::OkStatus();
}

int Consistency() {
  if (absl::GetFlag(FLAGS_json)) {
    std::cerr << "ps_bench: consistency writes its figures with --csv, not --json" << std::endl;
    return 2;
  }
  ps::ConsistencyBenchOptions o;
  auto modes = ps::ParseModes(absl::GetFlag(FLAGS_modes), "modes");
  auto optimizers = ps::ParseOptimizers(absl::GetFlag(FLAGS_optimizers), "optimizers");
  for (const absl::Status& s : {modes.status(), optimizers.status()}) {
    if (!s.ok()) {
      std::cerr << "ps_bench: " << s.message() << std::endl;
      return 2;
    }
  }
  o.modes = *modes;
  o.optimizers = *optimizers;
  o.target = absl::GetFlag(FLAGS_target_accuracy);
  o.stop_at_target = absl::GetFlag(FLAGS_stop_at_target);
  o.epochs = 1000;  // the limit is --step_limit
  o.max_steps = absl::GetFlag(FLAGS_step_limit);
  o.eval_every = absl::GetFlag(FLAGS_eval_every);
  o.straggler_slowdown = absl::GetFlag(FLAGS_straggler_slowdown);
  const std::string straggler = absl::GetFlag(FLAGS_straggler);
  o.rotating_straggler = straggler == "rotating";
  if (straggler != "fixed" && straggler != "rotating") {
    std::cerr << "ps_bench: unknown --straggler=" << straggler << ": expected fixed or rotating"
              << std::endl;
    return 2;
  }
  const std::string slowdown_of = absl::GetFlag(FLAGS_straggler_slowdown_of);
  if (slowdown_of != "step" && slowdown_of != "compute") {
    std::cerr << "ps_bench: unknown --straggler_slowdown_of=" << slowdown_of
              << ": expected step or compute" << std::endl;
    return 2;
  }
  o.slowdown_of_step = slowdown_of == "step";
  const char* slept = o.slowdown_of_step ? "usual step" : "compute";
  const double timeout = absl::GetFlag(FLAGS_row_timeout);
  o.repeats = absl::GetFlag(FLAGS_repeats);
  if (absl::GetFlag(FLAGS_quick)) {
    o.max_steps = 30;
    o.eval_every = 10;
  }
  if (!(o.target > 0 && o.target <= 1) || o.max_steps <= 0 || o.eval_every <= 0 ||
      !(o.straggler_slowdown >= 0) || !(timeout > 0) || o.repeats < 1) {
    std::cerr << "ps_bench: need 0 < --target_accuracy <= 1, --step_limit > 0, "
                 "--eval_every > 0, --straggler_slowdown >= 0, --row_timeout > 0, --repeats >= 1"
              << std::endl;
    return 2;
  }
  o.row_timeout = absl::Seconds(timeout);
  o.dataset_dir = absl::GetFlag(FLAGS_dataset_dir);
  o.log_dir = absl::GetFlag(FLAGS_log_dir);
  o.server_binary = absl::GetFlag(FLAGS_server_binary);
  if (o.server_binary.empty()) o.server_binary = FindRunfile("server/ps_server");
  o.worker_binary = absl::GetFlag(FLAGS_worker_binary);
  if (o.worker_binary.empty()) o.worker_binary = FindRunfile("worker/ps_worker");
  const std::string straggler_line =
      o.rotating_straggler
          ? absl::StrFormat("each worker sleeps %gx its %s time on every %dth step, in turn",
                            o.straggler_slowdown, slept, o.num_workers)
          : absl::StrFormat("worker %d sleeps %gx its %s time", o.num_workers - 1,
                            o.straggler_slowdown, slept);
  const std::string setup = absl::StrFormat(
      "%d shards, %d workers of batch %d (%s), until test accuracy %.2f or %d steps per worker",
      o.num_shards, o.num_workers, o.batch_size, straggler_line, o.target, o.max_steps);
  std::printf("%s\n", setup.c_str());
  absl::StatusOr<std::vector<ps::ConsistencyResult>> results = ps::RunConsistencyBench(o);
  if (!results.ok()) {
    std::cerr << "ps_bench: " << results.status() << std::endl;
    return 1;
  }
  std::printf("\n");
  ps::PrintConsistencyTable(*results, o.target);
  std::fflush(stdout);
  int rc = 0;
  for (const ps::ConsistencyResult& r : *results) {
    if (r.outcome == ps::RowOutcome::kFailed) rc = 1;
  }
  const std::string png = absl::GetFlag(FLAGS_png);
  std::string csv = absl::GetFlag(FLAGS_csv);
  if (csv.empty() && !png.empty()) {
    csv = absl::StrCat(png.size() > 4 && png.substr(png.size() - 4) == ".png"
                           ? png.substr(0, png.size() - 4)
                           : png,
                       ".csv");
  }
  if (!csv.empty()) {
    if (absl::Status s = ps::WriteConsistencyCsv(*results, csv); !s.ok()) {
      std::cerr << "ps_bench: " << s.message() << std::endl;
      return 1;
    }
    std::printf("wrote %s\n", csv.c_str());
  }
  if (!png.empty()) {
    if (absl::Status s = Plot(csv, png, o.target, "ps_bench consistency: " + setup, png + ".log");
        !s.ok()) {
      std::cerr << "ps_bench: plotting failed: " << s.message() << std::endl;
      return 1;
    }
    std::printf("wrote %s\n", png.c_str());
  }
  return rc;
}

ps::BenchTls TlsFromFlags() {
  ps::BenchTls tls;
  tls.enabled = absl::GetFlag(FLAGS_tls);
  tls.dir = absl::GetFlag(FLAGS_tls_dir);
  return tls;
}

absl::StatusOr<std::vector<ps::Row>> Transport() {
  ps::TransportBenchOptions o;
  o.sizes = absl::GetFlag(FLAGS_sizes);
  o.shards = absl::GetFlag(FLAGS_shards);
  o.clients = absl::GetFlag(FLAGS_clients);
  o.ops = absl::GetFlag(FLAGS_ops);
  o.transports = absl::GetFlag(FLAGS_transports);
  o.unix_socket = absl::GetFlag(FLAGS_unix);
  o.wire_dtypes = absl::GetFlag(FLAGS_wire_dtype);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  ASSIGN_OR_RETURN(o.duration, ps::SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  o.tls = TlsFromFlags();
  o.server_process = absl::GetFlag(FLAGS_server_process);
  o.server_cpus = absl::GetFlag(FLAGS_server_cpus);
  o.client_cpus = absl::GetFlag(FLAGS_client_cpus);
  if (o.server_process) {
    o.server_binary = absl::GetFlag(FLAGS_server_binary);
    if (o.server_binary.empty()) o.server_binary = FindRunfile("server/ps_server");
  }
  return ps::RunTransportBench(o);
}

absl::StatusOr<std::vector<ps::Row>> Sparse() {
  ps::SparseBenchOptions o;
  o.ids = absl::GetFlag(FLAGS_sparse_ids);
  o.dims = absl::GetFlag(FLAGS_dims);
  o.dists = absl::GetFlag(FLAGS_dists);
  o.ops = absl::GetFlag(FLAGS_ops);
  o.shards = absl::GetFlag(FLAGS_sparse_shards);
  o.vocab = absl::GetFlag(FLAGS_vocab);
  o.warmup = absl::GetFlag(FLAGS_warmup);
  ASSIGN_OR_RETURN(o.duration, ps::SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  return ps::RunSparseBench(o);
}

absl::StatusOr<std::vector<ps::Row>> Apply() {
  ps::ApplyBenchOptions o;
  o.elements = absl::GetFlag(FLAGS_apply_elements);
  ASSIGN_OR_RETURN(o.duration, ps::SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  return ps::RunApplyBench(o);
}

// --process_sockets into `o`; false (after a message) for a bad value.
bool ProcessSocketsFromFlag(ps::TrainBenchOptions* o) {
  o->process_unix = o->process_tcp = false;
  for (absl::string_view s : absl::StrSplit(absl::GetFlag(FLAGS_process_sockets), ',',
                                            absl::SkipWhitespace())) {
    if (s == "unix") {
      o->process_unix = true;
    } else if (s == "tcp") {
      o->process_tcp = true;
    } else {
      std::cerr << "ps_bench: unknown --process_sockets entry '" << s
                << "': expected unix and/or tcp" << std::endl;
      return false;
    }
  }
  if (!o->process_unix && !o->process_tcp) {
    std::cerr << "ps_bench: --process_sockets names no socket (expected unix and/or tcp)"
              << std::endl;
    return false;
  }
  return true;
}

absl::StatusOr<std::vector<ps::Row>> CtrTrain() {
  ps::CtrTrainBenchOptions o;
  if (absl::GetFlag(FLAGS_max_steps) > 0) o.steps = absl::GetFlag(FLAGS_max_steps);
  o.batch = absl::GetFlag(FLAGS_ctr_batch);
  o.vocab = absl::GetFlag(FLAGS_ctr_vocab);
  o.eval_examples = absl::GetFlag(FLAGS_ctr_eval_examples);
  o.dense_lr = absl::GetFlag(FLAGS_ctr_dense_lr);
  o.print_workers = !absl::GetFlag(FLAGS_json);
  return ps::RunCtrTrainBench(o);
}

absl::StatusOr<std::vector<ps::Row>> Train() {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model == "ctr") return CtrTrain();
  if (model != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --model '", model, "' (known: mlp, ctr)"));
  }
  ps::TrainBenchOptions o;
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  ASSIGN_OR_RETURN(o.scrape_every, ps::SecondsFromFlag("scrape_every", absl::GetFlag(FLAGS_scrape_every)));
  if (o.scrape_every < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--scrape_every must be >= 0");
  }
  o.dataset_dir = absl::GetFlag(FLAGS_dataset_dir);
  o.tls = TlsFromFlags();
  o.scrape_rounds = absl::GetFlag(FLAGS_repeats);
  if (o.scrape_rounds < 1) return absl::InvalidArgumentError("--repeats must be >= 1");
  o.print_workers = !absl::GetFlag(FLAGS_json);
  o.processes = absl::GetFlag(FLAGS_processes);
  if (o.processes) {
    ProcessSocketsFromFlag(&o);  // checked in main()
    ASSIGN_OR_RETURN(o.process_timeout,
                     ps::SecondsFromFlag("row_timeout", absl::GetFlag(FLAGS_row_timeout)));
    o.server_binary = absl::GetFlag(FLAGS_server_binary);
    if (o.server_binary.empty()) o.server_binary = FindRunfile("server/ps_server");
    o.worker_binary = absl::GetFlag(FLAGS_worker_binary);
    if (o.worker_binary.empty()) o.worker_binary = FindRunfile("worker/ps_worker");
  }
  return ps::RunTrainBench(o);
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  std::vector<char*> args = ps::ParseCommandLine(
      argc, argv,
      "Parameter-server benchmarks; every figure is a ratio of a baseline measured in the same "
      "run.\n  ps_bench transport [--sizes=...] [--shards=S] [--clients=W] [--seconds=T]\n"
      "  ps_bench apply [--apply_elements=...]\n  ps_bench train [--epochs=3] [--processes]\n"
      "  ps_bench train --model=ctr [--max_steps=2000] [--ctr_batch=128]\n"
      "  ps_bench sparse [--sparse_ids=1000,10000,100000] [--dims=16,64] [--dists=uniform,zipf]\n"
      "  ps_bench consistency [--modes=...] [--optimizers=sgd:0.1,adam:0.001] [--png=PATH] "
      "[--quick]\n"
      "TLS cost: deploy/make_certs.sh DIR --servers=1 --workers=W, then add --tls "
      "--tls_dir=DIR to transport or train.\n"
      "Unix sockets against loopback TCP: add --unix to transport.\n"
      "TLS per side: add --server_process --server_cpus=0 --client_cpus=1 to transport --tls.\n"
      "Add --json for machine-readable output.");
  const std::string mode = args.size() == 2 ? args[1] : "";
  if (mode == "consistency") return Consistency();
  absl::StatusOr<std::vector<ps::Row>> rows;
  if (mode == "transport") {
    rows = Transport();
  } else if (mode == "apply") {
    rows = Apply();
  } else if (mode == "sparse") {
    rows = Sparse();
  } else if (mode == "train") {
    if (const std::string m = absl::GetFlag(FLAGS_model); m != "mlp" && m != "ctr") {
      std::cerr << "ps_bench: unknown --model '" << m << "' (known: mlp, ctr)" << std::endl;
      return 2;
    }
    ps::TrainBenchOptions check;
    if (!ProcessSocketsFromFlag(&check)) return 2;
    rows = Train();
  } else {
    std::cerr << "usage: ps_bench transport|apply|train|sparse|consistency [flags] (see --help)"
              << std::endl;
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
