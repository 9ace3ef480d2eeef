// ps_bench: measures the parameter server against baselines taken in the same
// run, and prints every figure as a ratio of its baseline.
//
//   ps_bench transport   push / pull / push-pull throughput and latency over
//                        real gRPC shards, against raw loopback TCP
//                        (tools/bench_transport.h)
//   ps_bench apply       the optimizer's apply rate, against a plain axpy loop
//                        (tools/bench_apply.h)
//   ps_bench train       Fashion-MNIST MLP: standalone, then 1 server and 2
//                        workers in sync and in async mode (tools/bench_train.h)
//
// Human-readable tables by default; --json prints one JSON object instead.
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/allocator.h"
#include "common/command_line.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench_apply.h"
#include "tools/bench_common.h"
#include "tools/bench_train.h"
#include "tools/bench_transport.h"
#include "worker/dataset.h"

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

namespace {

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
  o.warmup = absl::GetFlag(FLAGS_warmup);
  ASSIGN_OR_RETURN(o.duration, ps::SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  o.tls = TlsFromFlags();
  return ps::RunTransportBench(o);
}

absl::StatusOr<std::vector<ps::Row>> Apply() {
  ps::ApplyBenchOptions o;
  o.elements = absl::GetFlag(FLAGS_apply_elements);
  ASSIGN_OR_RETURN(o.duration, ps::SecondsFromFlag("seconds", absl::GetFlag(FLAGS_seconds)));
  return ps::RunApplyBench(o);
}

absl::StatusOr<std::vector<ps::Row>> Train() {
  ps::TrainBenchOptions o;
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  o.dataset_dir = absl::GetFlag(FLAGS_dataset_dir);
  o.tls = TlsFromFlags();
  o.print_workers = !absl::GetFlag(FLAGS_json);
  return ps::RunTrainBench(o);
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  std::vector<char*> args = ps::ParseCommandLine(
      argc, argv,
      "Parameter-server benchmarks; every figure is a ratio of a baseline measured in the same "
      "run.\n  ps_bench transport [--sizes=...] [--shards=S] [--clients=W] [--seconds=T]\n"
      "  ps_bench apply [--apply_elements=...]\n  ps_bench train [--epochs=3]\n"
      "TLS cost: deploy/make_certs.sh DIR --servers=1 --workers=W, then add --tls "
      "--tls_dir=DIR to transport or train.\n"
      "Add --json for machine-readable output.");
  const std::string mode = args.size() == 2 ? args[1] : "";
  absl::StatusOr<std::vector<ps::Row>> rows;
  if (mode == "transport") {
    rows = Transport();
  } else if (mode == "apply") {
    rows = Apply();
  } else if (mode == "train") {
    rows = Train();
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
