// ps_worker: trains a model on its share of Fashion-MNIST against the
// parameter servers (or alone, with --standalone).
//
//   ps_worker --servers=127.0.0.1:50051,127.0.0.1:50052 --worker_id=0 --num_workers=2
#include <iostream>
#include <string>
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "client/ps_client.h"
#include "common/allocator.h"
#include "common/flag_lists.h"
#include "worker/backend.h"
#include "worker/dataset.h"
#include "worker/trainer.h"

ABSL_FLAG(std::string, servers, "",
          "Comma-separated HOST:PORT of every parameter-server shard, in shard order.");
ABSL_FLAG(int, worker_id, 0, "This worker's id, 0 <= worker_id < num_workers.");
ABSL_FLAG(int, num_workers, 1, "Total number of workers (must match the servers).");
ABSL_FLAG(bool, standalone, false,
          "Train alone with local SGD and no servers (for debugging a model, and as the "
          "single-process baseline). Uses --lr; ignores --servers.");
ABSL_FLAG(double, lr, 0.1, "Learning rate for --standalone (servers use their own --lr).");
ABSL_FLAG(std::string, model, "mlp", "mlp (hidden layers from --hidden) or softmax (none).");
ABSL_FLAG(std::string, hidden, "512,256", "Hidden layer widths of the mlp, comma-separated.");
ABSL_FLAG(std::string, dataset_dir, ps::kDefaultDatasetDir,
          "Folder with the Fashion-MNIST IDX files (gzip or plain), as installed by Debian's "
          "dataset-fashion-mnist package.");
ABSL_FLAG(int, batch_size, 64, "Examples per step on this worker.");
ABSL_FLAG(int, epochs, 1, "Passes over the training set.");
ABSL_FLAG(int64_t, max_steps, 0, "Stop after this many steps; 0 = no limit.");
ABSL_FLAG(uint64_t, seed, 1, "Seed for initialization and data order (same on all workers).");
ABSL_FLAG(bool, shuffle, true, "Reshuffle the training set every epoch.");
ABSL_FLAG(int64_t, eval_every, 0,
          "Worker 0 evaluates on the test set every this many steps; 0 = only at the end.");
ABSL_FLAG(int64_t, log_every, 100, "Steps between metrics lines.");
ABSL_FLAG(std::string, metrics_file, "",
          "Write JSON lines (worker_id, step, epoch, train_loss, samples_per_sec, wall_s, "
          "test_accuracy, test_loss) to this file; {worker_id} in the path is replaced by the "
          "worker's id, so that workers started with the same flags write separate files.");
ABSL_FLAG(std::string, save_model, "",
          "At the end, worker 0 writes each tensor as DIR/<name>.npy (float32, C order).");
ABSL_FLAG(std::string, device, "auto",
          "Compute backend: cuda (a GPU; an error where there is none), cpu, or auto (cuda "
          "when this binary was built with --config=cuda and a GPU is found, else cpu; the "
          "choice is logged at startup).");
ABSL_FLAG(int, gpu, 0, "CUDA device index for --device=cuda|auto (one worker per GPU).");
ABSL_FLAG(bool, tf32, false,
          "Let cuBLAS use TF32 tensor cores: faster, but products keep only 10 mantissa bits, "
          "so results differ from the CPU's.");
ABSL_FLAG(int, threads, 0, "CPU math threads; 0 = all cores.");
ABSL_FLAG(double, connect_timeout, 60, "Seconds to wait for the servers to come up.");
ABSL_FLAG(std::string, transport, "stream",
          "stream: one long-lived gRPC stream per server, tensors in ~1 MB chunks (fastest); "
          "unary: one RPC per server per step.");
ABSL_FLAG(double, keepalive, 10,
          "Seconds without traffic before a connection to a server is pinged; an unanswered "
          "ping closes it after as long again, failing its calls with UNAVAILABLE (a dead "
          "server or link is noticed in about twice this). 0 = no pings; else >= 1.");
ABSL_FLAG(double, wait_timeout, 120,
          "Seconds a step may wait for the other workers (sync) or for worker 0's init before "
          "failing with an error that names the missing workers.");

ABSL_FLAG(double, retry_timeout, 60,
          "Seconds a step keeps retrying when a server goes away (restarts, or its link "
          "drops): the worker reconnects, puts a restarted server back at its step from its "
          "own copy of the weights, and retries; the servers apply no push twice. 0 = fail "
          "at once.");
ABSL_FLAG(std::string, tls_ca, "",
          "PEM CA certificate(s) that signed the servers' certificates: connect with TLS and "
          "verify each server's certificate against it and the address's host name (or "
          "--tls_server_name).");
ABSL_FLAG(std::string, tls_cert, "",
          "PEM client certificate for mutual TLS; its Subject CN, worker-<id> with this "
          "--worker_id, is this worker's identity on the servers. Re-read when it changes on "
          "disk.");
ABSL_FLAG(std::string, tls_key, "", "PEM private key of --tls_cert.");
ABSL_FLAG(std::string, tls_server_name, "",
          "The name the servers' certificates carry, when the addresses in --servers are not "
          "it (e.g. IP addresses).");
ABSL_FLAG(std::string, auth_token_file, "",
          "File holding this client's bearer token ('TOKEN' or 'IDENTITY TOKEN'), sent with "
          "every call; needs --tls_ca.");
ABSL_FLAG(bool, insecure, false,
          "Allow plaintext connections (no --tls_ca) to non-loopback servers: anyone on the "
          "path can read the traffic and impersonate the servers.");
ABSL_FLAG(double, slowdown, 0,
          "For tests of stragglers: after computing each step's gradient, sleep this many "
          "times as long as the computation took. 0 = full speed.");

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "ps_worker: " << s << std::endl;
  return 1;
}

absl::StatusOr<std::vector<int>> ParseHidden(const std::string& model, const std::string& text) {
  if (model == "softmax") return std::vector<int>{};
  if (model != "mlp") {
    return absl::InvalidArgumentError(
        absl::StrCat("unknown --model=", model, ": expected mlp or softmax"));
  }
  absl::StatusOr<std::vector<int>> out = ps::ParsePositiveIntList("hidden", text);
  if (out.ok() && out->empty()) {
    return absl::InvalidArgumentError("--model=mlp needs at least one --hidden width");
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  absl::SetProgramUsageMessage(
      "Parameter-server worker. Example (certificates from deploy/make_certs.sh):\n"
      "  ps_worker --servers=ps-server-0:50051,ps-server-1:50051 --worker_id=0 --num_workers=2 "
      "--epochs=2 --tls_ca=ca.pem --tls_cert=worker-0.pem --tls_key=worker-0.key\n"
      "or, without servers:\n  ps_worker --standalone --batch_size=128");
  absl::ParseCommandLine(argc, argv);

  ps::TrainerOptions options;
  options.worker_id = absl::GetFlag(FLAGS_worker_id);
  options.num_workers = absl::GetFlag(FLAGS_num_workers);
  absl::StatusOr<std::vector<int>> hidden =
      ParseHidden(absl::GetFlag(FLAGS_model), absl::GetFlag(FLAGS_hidden));
  if (!hidden.ok()) return Fail(hidden.status());
  options.hidden = *hidden;
  options.batch_size = absl::GetFlag(FLAGS_batch_size);
  options.epochs = absl::GetFlag(FLAGS_epochs);
  options.max_steps = absl::GetFlag(FLAGS_max_steps);
  options.seed = absl::GetFlag(FLAGS_seed);
  options.shuffle = absl::GetFlag(FLAGS_shuffle);
  options.eval_every = absl::GetFlag(FLAGS_eval_every);
  options.log_every = absl::GetFlag(FLAGS_log_every);
  options.metrics_file = absl::StrReplaceAll(
      absl::GetFlag(FLAGS_metrics_file), {{"{worker_id}", absl::StrCat(options.worker_id)}});
  options.save_model = absl::GetFlag(FLAGS_save_model);
  options.log = &std::cout;
  options.slowdown = absl::GetFlag(FLAGS_slowdown);
  if (!(options.slowdown >= 0)) return Fail(absl::InvalidArgumentError("--slowdown must be >= 0"));

  const bool standalone = absl::GetFlag(FLAGS_standalone);
  if (standalone && options.num_workers != 1) {
    return Fail(absl::InvalidArgumentError("--standalone trains alone: use --num_workers=1"));
  }

  absl::StatusOr<ps::FashionMnist> data = ps::LoadFashionMnist(absl::GetFlag(FLAGS_dataset_dir));
  if (!data.ok()) return Fail(data.status());
  if (absl::Status s = ps::ValidateTrainerOptions(options, data->train); !s.ok()) return Fail(s);

  ps::BackendOptions backend_options;
  backend_options.device = absl::GetFlag(FLAGS_device);
  backend_options.threads = absl::GetFlag(FLAGS_threads);
  backend_options.gpu = absl::GetFlag(FLAGS_gpu);
  backend_options.tf32 = absl::GetFlag(FLAGS_tf32);

  ps::ClientOptions client_options;
  if (!standalone) {
    client_options.servers =
        absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
    if (client_options.servers.empty()) {
      return Fail(absl::InvalidArgumentError(
          "--servers is empty: list the parameter servers (HOST:PORT,...) or pass --standalone"));
    }
    client_options.worker_id = options.worker_id;
    client_options.num_workers = options.num_workers;
    client_options.connect_timeout = absl::Seconds(absl::GetFlag(FLAGS_connect_timeout));
    client_options.wait_timeout = absl::Seconds(absl::GetFlag(FLAGS_wait_timeout));
    const double keepalive = absl::GetFlag(FLAGS_keepalive);
    if (!(keepalive == 0 || (keepalive >= 1 && keepalive <= 86400))) {
      return Fail(absl::InvalidArgumentError(
          absl::StrCat("--keepalive must be 0 (off) or 1..86400 seconds, got ", keepalive)));
    }
    client_options.keepalive = absl::Seconds(absl::GetFlag(FLAGS_keepalive));
    absl::StatusOr<ps::ClientOptions::Transport> transport =
        ps::ParseTransport(absl::GetFlag(FLAGS_transport));
    if (!transport.ok()) return Fail(transport.status());
    client_options.transport = *transport;
    const double retry = absl::GetFlag(FLAGS_retry_timeout);
    if (!(retry >= 0)) return Fail(absl::InvalidArgumentError("--retry_timeout must be >= 0"));
    client_options.retry_timeout = absl::Seconds(retry);
    client_options.log = [](absl::string_view line) { std::cout << line << std::endl; };
    ps::SecurityOptions& security = client_options.security;
    security.tls_ca = absl::GetFlag(FLAGS_tls_ca);
    security.tls_cert = absl::GetFlag(FLAGS_tls_cert);
    security.tls_key = absl::GetFlag(FLAGS_tls_key);
    security.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
    security.auth_token_file = absl::GetFlag(FLAGS_auth_token_file);
    security.insecure = absl::GetFlag(FLAGS_insecure);
  }
  absl::StatusOr<ps::TrainResult> result =
      ps::RunWorker(options, &*data, backend_options, standalone ? nullptr : &client_options,
                    static_cast<float>(absl::GetFlag(FLAGS_lr)));
  if (!result.ok()) return Fail(result.status());
  return 0;
}
