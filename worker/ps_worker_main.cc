// ps_worker: trains a model on its share of the data against the parameter
// servers (or alone, with --standalone): the MLP on Fashion-MNIST
// (worker/mlp/), or, with --model=ctr, the click-through-rate model on
// embedding tables (worker/ctr/). One run loop drives either
// (worker/run_loop.h), and one reporter says what it does
// (worker/reporter.h).
//
//   ps_worker --servers=127.0.0.1:50051,127.0.0.1:50052 --worker_id=0 --num_workers=2
//
// With --coordinator it takes its id and servers from etcd (worker/job.h),
// and leaves the job at SIGINT or SIGTERM (worker/stop_signals.h).
// Its flags: worker/worker_flags.h, worker/mlp/flags.h, worker/ctr/flags.h,
// worker/compute/flags.h, client/client_flags.h and the security flags of
// common/client_security_flags.h.
#include <unistd.h>

#include <iostream>
#include <memory>

#include "absl/cleanup/cleanup.h"
#include "common/allocator.h"
#include "common/command_line.h"
#include "common/status_macros.h"
#include "worker/ctr/flags.h"
#include "worker/job.h"
#include "worker/mlp/flags.h"
#include "worker/reporter.h"
#include "worker/run_loop.h"
#include "worker/stop_signals.h"
#include "worker/train/workload.h"
#include "worker/worker_flags.h"

namespace {

// Exit statuses: 2 for a bad command line (a flag's value, alone or against
// the data set), as ps_server and ps_ctl; 1 for a failure while running.
int Fail(const absl::Status& s, int status = 1) {
  std::cerr << "ps_worker: " << s << std::endl;
  return status;
}

int FailStarting(const absl::Status& s) { return Fail(s, absl::IsInvalidArgument(s) ? 2 : 1); }

// The workload --model names; with --model=ctr, also its own in-process
// rules for --standalone.
absl::StatusOr<std::unique_ptr<ps::Workload>> MakeWorkload(ps::WorkerConfig* config) {
  if (config->workload.model != "ctr") {
    return ps::MlpWorkloadFromFlags(config->workload, config->backend);
  }
  ASSIGN_OR_RETURN(config->standalone_store, ps::CtrStandaloneStoreFromFlags());
  return ps::CtrWorkloadFromFlags(config->workload, config->backend.threads);
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
  // SIGINT and SIGTERM leave the job, then exit.
  ps::StopSignals* const stop = ps::StopSignals::Install();
  absl::StatusOr<ps::WorkerConfig> config = ps::WorkerConfigFromFlags();
  if (!config.ok()) return Fail(config.status(), 2);
  config->report.log = &std::cout;
  config->report.progress_line = ps::ShowProgress(config->progress, isatty(STDOUT_FILENO) == 1);
  // With --coordinator: this worker's id and its servers, from etcd; it
  // leaves the job when `job` goes, at the end of main.
  absl::StatusOr<ps::JobMembership> job = ps::JoinJob(&*config);
  if (!job.ok()) return FailStarting(job.status());
  if (stop != nullptr) stop->Watch(job->registration.get());
  absl::Cleanup unwatch = [stop] {  // before `job` goes
    if (stop != nullptr) stop->Unwatch();
  };

  // /metrics: up from before connecting until training ends (and
  // --metrics_linger after).
  absl::StatusOr<std::unique_ptr<ps::Reporter>> reporter = ps::Reporter::Create(config->report);
  if (!reporter.ok()) return FailStarting(reporter.status());
  // The client's lines erase the progress line; the reporter redraws it.
  config->client.log = (*reporter)->LogSink();

  absl::StatusOr<std::unique_ptr<ps::Workload>> workload = MakeWorkload(&*config);
  if (!workload.ok()) return FailStarting(workload.status());
  // Its data loaded: with a coordinator it waits for an epoch to take a
  // share of (the sync steps wait for it from then on).
  absl::StatusOr<std::unique_ptr<ps::DataShares>> shares = ps::JobDataShares(*config, *job);
  if (!shares.ok()) return FailStarting(shares.status());
  absl::StatusOr<ps::RunResult> result =
      ps::RunWorker(config->run, workload->get(), config->standalone ? nullptr : &config->client,
                    config->standalone_store, reporter->get(), shares->get());
  if (!result.ok()) return Fail(result.status());
  (*reporter)->Linger();
  return 0;
}
