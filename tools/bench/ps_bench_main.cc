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
//                        on ps-lite's cold workload, against ps-lite's driver
//                        (tools/bench/bench_rows_cold.h), or warm, against
//                        the dense path moving the same bytes
//                        (tools/bench/bench_sparse.h)
//   ps_bench elastic     a worker joining and leaving a running sync job
//                        (etcd, real processes): throughput after each
//                        event against the steady one, and the pause
//                        (tools/bench/bench_elastic.h)
//   ps_bench consistency time to accuracy of each consistency mode and
//                        optimizer with a straggler, real ps_server and
//                        ps_worker processes (tools/bench/bench_consistency.h)
//
// Human-readable tables by default; --json prints one JSON object instead.
// Each mode reads its flags with the <Mode>OptionsFromFlags of its header
// (its own flags in bench_<mode>_flags.cc, the shared ones in bench_flags.h).
// Exit status: 0 when every figure was measured, 2 for a bad flag value
// (INVALID_ARGUMENT from the flags), 1 for anything else.
#include <functional>
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "common/allocator.h"
#include "common/command_line.h"
#include "common/status_macros.h"
#include "tools/bench/bench_apply.h"
#include "tools/bench/bench_common.h"
#include "tools/bench/bench_consistency.h"
#include "tools/bench/bench_ctr_train.h"
#include "tools/bench/bench_elastic.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_sparse.h"
#include "tools/bench/bench_train.h"
#include "tools/bench/bench_transport.h"

namespace {

constexpr char kUsage[] =
    "Parameter-server benchmarks; every figure is a ratio of a baseline measured in the same "
    "run.\n  ps_bench transport [--sizes=...] [--shards=S] [--clients=W] [--seconds=T]\n"
    "  ps_bench apply [--apply_elements=...]\n  ps_bench train [--epochs=3] [--processes]\n"
    "  ps_bench train --model=ctr [--max_steps=2000] [--ctr_batch=128]\n"
    "  ps_bench sparse [--sparse_ids=1000,10000,100000] [--dims=16,64] [--dists=uniform,zipf]\n"
    "    [--sockets=tcp,unix] [--sparse_clients=W] [--pslite_bench=PATH] [--sparse_workload=warm]\n"
    "  ps_bench elastic [--elastic_shards=2] [--elastic_window=5]\n"
    "  ps_bench consistency [--modes=...] [--optimizers=sgd:0.1,adam:0.001] [--png=PATH] "
    "[--quick]\n"
    "TLS cost: deploy/make_certs.sh DIR --servers=1 --workers=W, then add --tls "
    "--tls_dir=DIR to transport or train.\n"
    "Unix sockets against loopback TCP: add --unix to transport.\n"
    "TLS per side: add --server_process --server_cpus=0 --client_cpus=1 to transport --tls.\n"
    "Add --json for machine-readable output.";

// A mode whose options were read from the flags, ready to run.
using RowsRun = std::function<absl::StatusOr<std::vector<ps::Row>>()>;

// Binds `run` to the options `from_flags` reads.
template <typename Options, typename Run>
absl::StatusOr<RowsRun> Bind(absl::StatusOr<Options> (*from_flags)(), Run run) {
  ASSIGN_OR_RETURN(Options o, from_flags());
  return RowsRun([o = std::move(o), run] { return run(o); });
}

// The modes that print rows (all but consistency), each with the reading of
// its flags.
struct RowsMode {
  const char* name;
  absl::StatusOr<RowsRun> (*from_flags)();
};
const RowsMode kRowsModes[] = {
    {"transport", [] { return Bind(ps::TransportBenchOptionsFromFlags, ps::RunTransportBench); }},
    {"apply", [] { return Bind(ps::ApplyBenchOptionsFromFlags, ps::RunApplyBench); }},
    {"sparse", [] { return Bind(ps::SparseBenchOptionsFromFlags, ps::RunSparseBench); }},
    {"elastic", [] { return Bind(ps::ElasticBenchOptionsFromFlags, ps::RunElasticBench); }},
    {"train",
     []() -> absl::StatusOr<RowsRun> {
       ASSIGN_OR_RETURN(const ps::TrainModel model, ps::TrainModelFromFlags());
       if (model == ps::TrainModel::kCtr) {
         return Bind(ps::CtrTrainBenchOptionsFromFlags, ps::RunCtrTrainBench);
       }
       return Bind(ps::TrainBenchOptionsFromFlags, ps::RunTrainBench);
     }},
};

// The exit status for an error reading the flags.
int FlagsError(const absl::Status& s) {
  std::cerr << "ps_bench: " << s.message() << std::endl;
  return absl::IsInvalidArgument(s) ? 2 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  const std::vector<char*> args = ps::ParseCommandLine(argc, argv, kUsage);
  const std::string mode = args.size() == 2 ? args[1] : "";
  if (mode == "sparse" && ps::IsRowsClient()) {
    absl::StatusOr<ps::RowsClientOptions> o = ps::RowsClientOptionsFromFlags();
    absl::Status s = o.ok() ? ps::RunRowsClient(*o) : o.status();
    if (!s.ok()) std::cout << "error " << s.ToString() << std::endl;
    return s.ok() ? 0 : 1;
  }
  if (mode == "consistency") {
    absl::StatusOr<ps::ConsistencyCommand> command = ps::ConsistencyCommandFromFlags();
    if (!command.ok()) return FlagsError(command.status());
    if (absl::Status s = ps::RunConsistencyCommand(*command); !s.ok()) {
      std::cerr << "ps_bench: " << s.message() << std::endl;
      return 1;
    }
    return 0;
  }
  const RowsMode* chosen = nullptr;
  for (const RowsMode& m : kRowsModes) {
    if (mode == m.name) chosen = &m;
  }
  if (chosen == nullptr) {
    std::cerr
        << "usage: ps_bench transport|apply|train|sparse|elastic|consistency [flags] (see --help)"
        << std::endl;
    return 2;
  }
  absl::StatusOr<RowsRun> run = chosen->from_flags();
  if (!run.ok()) return FlagsError(run.status());
  const absl::StatusOr<std::vector<ps::Row>> rows = (*run)();
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
