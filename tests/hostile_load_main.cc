// hostile_load: puts one kind of hostile load on a running ps_server and
// prints the server's memory before and after, for the limits figures in
// docs/operating.md. Not a test: it measures (the server's pid is needed
// for /proc).
//
//   hostile_load --server=127.0.0.1:PORT --pid=PID --scenario=silent_pushes --count=1000
//   scenarios: silent_pushes (streams that start a push and go silent),
//              waiting_pulls (unary pulls waiting for a step that never comes),
//              huge_init (an init declaring a 1 GiB model and sending 4 MB of it)
#include <iostream>
#include <map>
#include <string>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "tests/hostile_load.h"
#include "tools/process/proc.h"

ABSL_FLAG(std::string, server, "", "HOST:PORT of the ps_server (1 shard, 2 workers, sync).");
ABSL_FLAG(int, pid, 0, "The server's pid, to read its memory from /proc.");
ABSL_FLAG(std::string, scenario, "", "silent_pushes, waiting_pulls or huge_init.");
ABSL_FLAG(int, count, 1000, "Streams or pulls to open.");
ABSL_FLAG(int, per_channel, 900, "Calls per connection (below --max_concurrent_streams).");

namespace {

// "VmRSS N kB, VmHWM N kB", or why they cannot be read.
std::string Memory(int pid) {
  std::string out;
  for (const char* field : {"VmRSS", "VmHWM"}) {
    const absl::StatusOr<int64_t> bytes = ps::ProcStatusBytes(pid, field);
    absl::StrAppend(&out, out.empty() ? "" : ", ", field, " ",
                    bytes.ok() ? absl::StrCat(*bytes >> 10, " kB") : bytes.status().ToString());
  }
  return out;
}

const ps::ModelSpec kMlp = {{"fc1.weight", {784, 512}}, {"fc1.bias", {512}},
                            {"fc2.weight", {512, 256}}, {"fc2.bias", {256}},
                            {"fc3.weight", {256, 10}},  {"fc3.bias", {10}}};

}  // namespace

int main(int argc, char** argv) {
  absl::ParseCommandLine(argc, argv);
  const std::string server = absl::GetFlag(FLAGS_server);
  const int pid = absl::GetFlag(FLAGS_pid);
  const std::string scenario = absl::GetFlag(FLAGS_scenario);
  const int count = absl::GetFlag(FLAGS_count);
  if (scenario != "silent_pushes" && scenario != "waiting_pulls" && scenario != "huge_init") {
    std::cerr << "hostile_load: unknown --scenario '" << scenario
              << "' (silent_pushes, waiting_pulls or huge_init)\n";
    return 2;
  }
  if (scenario != "huge_init") {
    ps::ClientOptions co;
    co.servers = {server};
    co.num_workers = 2;
    auto client = ps::PsClient::Connect(co);
    if (!client.ok()) return std::cerr << client.status() << "\n", 1;
    ps::TensorList init;
    for (const ps::TensorSpec& t : kMlp) init.emplace_back(t.num_elements(), 0.01f);
    if (absl::Status s = (*client)->Init(kMlp, &init); !s.ok()) return std::cerr << s << "\n", 1;
  }
  std::cout << "before: " << Memory(pid) << std::endl;
  const absl::Time start = absl::Now();
  ps::HostileLoad load(server, absl::GetFlag(FLAGS_per_channel));
  if (scenario == "silent_pushes") load.SilentPushes(count);
  if (scenario == "waiting_pulls") load.WaitingPulls(count);
  if (scenario == "huge_init") {
    const grpc::Status st = load.HugeInit();
    std::cout << "init: " << st.error_code() << " " << st.error_message() << std::endl;
  }
  // Let the server take it all in: until no call was answered for 2 s.
  for (int last = -1, quiet = 0, t = 0; quiet < 2 && t < 120; ++t) {
    absl::SleepFor(absl::Seconds(1));
    const int answered = load.Answered(nullptr);
    quiet = answered == last ? quiet + 1 : 0;
    last = answered;
  }
  std::map<int, int> codes;
  const int answered = load.Answered(&codes);
  std::cout << "after " << count << " " << scenario << " (" << absl::Now() - start
            << "): " << Memory(pid) << "; calls already answered: " << answered;
  for (auto [code, n] : codes) std::cout << " [code " << code << ": " << n << "]";
  std::cout << std::endl;
  load.Cancel();
  absl::SleepFor(absl::Seconds(1));
  std::cout << "after cancel: " << Memory(pid) << std::endl;
  return 0;
}
