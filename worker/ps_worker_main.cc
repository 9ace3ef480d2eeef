// ps_worker: trains a model on its share of Fashion-MNIST against the
// parameter servers (or alone, with --standalone); with --model=ctr, the
// click-through-rate model on embedding tables (worker/ctr_worker.h).
//
//   ps_worker --servers=127.0.0.1:50051,127.0.0.1:50052 --worker_id=0 --num_workers=2
//
// Its flags: worker/worker_flags.h, client/client_flags.h and the security
// flags of common/client_security_flags.h.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "common/allocator.h"
#include "absl/time/clock.h"
#include "common/command_line.h"
#include "rpc/metrics_endpoint.h"
#include "worker/ctr_flags.h"
#include "worker/ctr_worker.h"
#include "worker/dataset.h"
#include "worker/progress.h"
#include "worker/trainer.h"
#include "worker/worker_flags.h"
#include "worker/worker_metrics.h"

namespace {

// Exit statuses: 2 for a bad command line (a flag's value, alone or against
// the data set), as ps_server and ps_ctl; 1 for a failure while running.
int Fail(const absl::Status& s, int status = 1) {
  std::cerr << "ps_worker: " << s << std::endl;
  return status;
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  ps::ParseCommandLine(
      argc, argv,
      "Parameter-server worker. Example (certificates from deploy/make_certs.sh):\n"
      "  ps_worker --servers=ps-server-0:50051,ps-server-1:50051 --worker_id=0 --num_workers=2 "
      "--epochs=2 --tls_ca=ca.pem --tls_cert=worker-0.pem --tls_key=worker-0.key\n"
      "or, without servers:\n  ps_worker --standalone --batch_size=128");
  absl::StatusOr<ps::WorkerConfig> config = ps::WorkerConfigFromFlags();
  if (!config.ok()) return Fail(config.status(), 2);
  config->trainer.log = &std::cout;
  config->trainer.progress_line = ps::ShowProgress(config->progress, isatty(STDOUT_FILENO) == 1);
  // With the progress line, a client's line first erases it (ANSI "erase in
  // line"); the trainer redraws it after.
  const char* const erase = config->trainer.progress_line ? "\r\033[K" : "";
  config->client.log = [erase](absl::string_view line) {
    std::cout << erase << line << std::endl;
  };

  // /metrics: up from before connecting until training ends (and
  // --metrics_linger after).
  auto metrics = std::make_shared<ps::WorkerMetrics>(config->trainer.worker_id);
  std::unique_ptr<ps::MetricsEndpoint> endpoint;
  if (!config->metrics.listen.empty()) {
    absl::StatusOr<std::unique_ptr<ps::MetricsEndpoint>> e =
        ps::MetricsEndpoint::Start(config->metrics, {metrics->registry()});
    if (!e.ok()) return Fail(e.status(), absl::IsInvalidArgument(e.status()) ? 2 : 1);
    endpoint = *std::move(e);
    config->trainer.metrics = metrics.get();
    std::cout << "ps_worker: worker " << config->trainer.worker_id << " metrics on "
              << (endpoint->tls() ? "https://" : "http://") << endpoint->address() << "/metrics"
              << std::endl;
  }

  if (config->ctr) {
    absl::StatusOr<ps::CtrWorkerOptions> ctr = ps::CtrWorkerOptionsFromFlags(*config);
    if (!ctr.ok()) return Fail(ctr.status(), 2);
    ctr->log = &std::cout;
    absl::StatusOr<ps::CtrWorkerResult> result =
        ps::RunCtrWorker(*ctr, config->standalone ? nullptr : &config->client);
    if (!result.ok()) {
      return Fail(result.status(), absl::IsInvalidArgument(result.status()) ? 2 : 1);
    }
    return 0;
  }

  absl::StatusOr<ps::FashionMnist> data = ps::LoadFashionMnist(config->dataset_dir);
  if (!data.ok()) return Fail(data.status());
  if (absl::Status s = ps::ValidateTrainerOptions(config->trainer, data->train); !s.ok()) {
    return Fail(s, 2);
  }
  absl::StatusOr<ps::TrainResult> result =
      ps::RunWorker(config->trainer, &*data, config->backend,
                    config->standalone ? nullptr : &config->client, config->standalone_optimizer);
  if (!result.ok()) return Fail(result.status());
  if (endpoint != nullptr && config->metrics_linger > absl::ZeroDuration()) {
    std::cout << "ps_worker: serving /metrics for " << config->metrics_linger << " more"
              << std::endl;
    absl::SleepFor(config->metrics_linger);
  }
  return 0;
}
