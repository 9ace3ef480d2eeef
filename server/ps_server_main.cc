// ps_server: serves one shard of the model's parameters over gRPC.
//
//   ps_server --listen=0.0.0.0:50051 --shard_id=0 --num_shards=2
//             --num_workers=2 --mode=sync --lr=0.1
//
// Prints "listening on HOST:PORT" as its first stdout line once serving, and
// runs until SIGINT or SIGTERM.
#include <signal.h>

#include <cstdio>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/strings/str_cat.h"
#include "common/allocator.h"
#include "server/ps_server.h"

ABSL_FLAG(std::string, listen, "0.0.0.0:50051",
          "HOST:PORT to serve on. Port 0 picks a free port; the first stdout line says which.");
ABSL_FLAG(std::string, port_file, "",
          "If set, write the bound HOST:PORT to this file once the server is serving.");
ABSL_FLAG(int, shard_id, 0, "This server's shard index, 0 <= shard_id < num_shards.");
ABSL_FLAG(int, num_shards, 1, "Total number of parameter-server shards (S).");
ABSL_FLAG(int, num_workers, 1, "Number of workers that train against the servers (W).");
ABSL_FLAG(std::string, mode, "sync",
          "sync: average one gradient per worker per step, then apply once. "
          "async: apply every gradient as it arrives.");
ABSL_FLAG(double, lr, 0.1, "SGD learning rate applied by this shard.");
ABSL_FLAG(double, pull_timeout, 120,
          "Longest wait, in seconds, of a pull (or a worker's init) for a version that has not "
          "arrived; a request may ask for less (ps_worker sends its --wait_timeout). Past it "
          "the call fails with DEADLINE_EXCEEDED naming the workers that have not pushed.");

namespace {

int Fail(const absl::Status& s) {
  std::cerr << "ps_server: " << s.message() << std::endl;
  return 2;
}

}  // namespace

int main(int argc, char** argv) {
  ps::TuneAllocatorForLargeBuffers();
  absl::SetProgramUsageMessage(
      "Parameter-server shard. Example:\n  ps_server --listen=0.0.0.0:50051 --shard_id=0 "
      "--num_shards=2 --num_workers=2 --mode=sync --lr=0.1");
  absl::ParseCommandLine(argc, argv);

  ps::ServerOptions options;
  options.listen = absl::GetFlag(FLAGS_listen);
  options.shard.shard_id = absl::GetFlag(FLAGS_shard_id);
  options.shard.num_shards = absl::GetFlag(FLAGS_num_shards);
  options.shard.num_workers = absl::GetFlag(FLAGS_num_workers);
  absl::StatusOr<ps::Mode> mode = ps::ParseMode(absl::GetFlag(FLAGS_mode));
  if (!mode.ok()) return Fail(mode.status());
  options.shard.mode = *mode;
  options.shard.optimizer.learning_rate = static_cast<float>(absl::GetFlag(FLAGS_lr));
  const double timeout = absl::GetFlag(FLAGS_pull_timeout);
  if (!(timeout > 0)) return Fail(absl::InvalidArgumentError("--pull_timeout must be > 0"));
  options.shard.default_wait = absl::Seconds(timeout);
  options.shard.max_wait = options.shard.default_wait;

  // Block the stop signals before any thread starts, so that only sigwait below
  // receives them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  absl::StatusOr<std::unique_ptr<ps::PsServer>> server = ps::PsServer::Start(options);
  if (!server.ok()) return Fail(server.status());
  std::cout << "listening on " << (*server)->address() << std::endl;
  std::cout << "shard " << options.shard.shard_id << "/" << options.shard.num_shards << ", "
            << ps::ModeName(options.shard.mode) << " mode, " << options.shard.num_workers
            << " workers, lr " << options.shard.optimizer.learning_rate << std::endl;
  const std::string port_file = absl::GetFlag(FLAGS_port_file);
  if (!port_file.empty()) {
    const std::string tmp = port_file + ".tmp";
    std::ofstream(tmp) << (*server)->address() << "\n";
    if (std::rename(tmp.c_str(), port_file.c_str()) != 0) {
      return Fail(absl::InternalError(absl::StrCat("cannot write --port_file=", port_file)));
    }
  }

  int sig = 0;
  sigwait(&stop, &sig);
  std::cout << "received " << (sig == SIGINT ? "SIGINT" : "SIGTERM") << ", shutting down"
            << std::endl;
  (*server)->Shutdown();
  return 0;
}
