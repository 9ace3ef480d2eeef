// ps_bench train's own flags (bench_train.h; --model=ctr's are in
// bench_ctr_train_flags.cc); the shared ones are in bench_flags.h.
#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/bench/bench_flags.h"
#include "tools/bench/bench_train.h"

ABSL_FLAG(int, epochs, 3, "train: epochs for each configuration.");
ABSL_FLAG(std::string, model, "mlp",
          "train: mlp (Fashion-MNIST) or ctr (the CTR model on embedding tables, synthetic "
          "data: standalone, then 1 and 2 servers with 2 workers, sync and async; "
          "tools/bench/bench_ctr_train.h; --max_steps steps per worker, 0 = 2000).");
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

namespace ps {
namespace {

// --process_sockets into `o`.
absl::Status ProcessSocketsFromFlag(TrainBenchOptions* o) {
  o->process_unix = o->process_tcp = false;
  for (absl::string_view s :
       absl::StrSplit(absl::GetFlag(FLAGS_process_sockets), ',', absl::SkipWhitespace())) {
    if (s == "unix") {
      o->process_unix = true;
    } else if (s == "tcp") {
      o->process_tcp = true;
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown --process_sockets entry '", s, "': expected unix and/or tcp"));
    }
  }
  if (!o->process_unix && !o->process_tcp) {
    return absl::InvalidArgumentError(
        "--process_sockets names no socket (expected unix and/or tcp)");
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<TrainModel> TrainModelFromFlags() {
  const std::string model = absl::GetFlag(FLAGS_model);
  if (model == "mlp") return TrainModel::kMlp;
  if (model == "ctr") return TrainModel::kCtr;
  return absl::InvalidArgumentError(
      absl::StrCat("unknown --model '", model, "' (known: mlp, ctr)"));
}

absl::StatusOr<TrainBenchOptions> TrainBenchOptionsFromFlags() {
  TrainBenchOptions o;
  // Checked whether or not --processes is given.
  RETURN_IF_ERROR(ProcessSocketsFromFlag(&o));
  o.epochs = absl::GetFlag(FLAGS_epochs);
  o.max_steps = absl::GetFlag(FLAGS_max_steps);
  o.lr = static_cast<float>(absl::GetFlag(FLAGS_lr));
  o.checkpoint_every = absl::GetFlag(FLAGS_checkpoint_every);
  ASSIGN_OR_RETURN(o.scrape_every,
                   SecondsFromFlag("scrape_every", absl::GetFlag(FLAGS_scrape_every)));
  if (o.scrape_every < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--scrape_every must be >= 0");
  }
  o.dataset_dir = absl::GetFlag(FLAGS_dataset_dir);
  o.tls = BenchTlsFromFlags();
  o.scrape_rounds = absl::GetFlag(FLAGS_repeats);
  if (o.scrape_rounds < 1) return absl::InvalidArgumentError("--repeats must be >= 1");
  o.print_workers = !absl::GetFlag(FLAGS_json);
  o.processes = absl::GetFlag(FLAGS_processes);
  if (o.processes) {
    ASSIGN_OR_RETURN(o.process_timeout,
                     SecondsFromFlag("row_timeout", absl::GetFlag(FLAGS_row_timeout)));
    ASSIGN_OR_RETURN(o.server_binary, ServerBinaryFromFlags());
    ASSIGN_OR_RETURN(o.worker_binary, WorkerBinaryFromFlags());
  }
  return o;
}

}  // namespace ps
