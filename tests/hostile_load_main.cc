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
#include <vector>

#include "absl/flags/flag.h"
#include "absl/flags/parse.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/clock.h"
#include "client/ps_client.h"
#include "grpcpp/create_channel.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "tools/process/server_process.h"

ABSL_FLAG(std::string, server, "", "HOST:PORT of the ps_server (1 shard, 2 workers, sync).");
ABSL_FLAG(int, pid, 0, "The server's pid, to read its memory from /proc.");
ABSL_FLAG(std::string, scenario, "", "silent_pushes, waiting_pulls or huge_init.");
ABSL_FLAG(int, count, 1000, "Streams or pulls to open.");
ABSL_FLAG(int, per_channel, 900, "Calls per connection (below --max_concurrent_streams).");

namespace {

std::string Memory(int pid) {
  return absl::StrCat("VmRSS ", ps::ProcStatusBytes(pid, "VmRSS:") >> 10, " kB, VmHWM ",
                      ps::ProcStatusBytes(pid, "VmHWM:") >> 10, " kB");
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
  std::vector<std::unique_ptr<ps::v1::ParameterServer::Stub>> stubs;
  auto stub_for = [&](int i) -> ps::v1::ParameterServer::Stub* {
    const size_t c = i / absl::GetFlag(FLAGS_per_channel);
    while (stubs.size() <= c) {
      grpc::ChannelArguments args;
      args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
      stubs.push_back(ps::v1::ParameterServer::NewStub(
          grpc::CreateCustomChannel(server, ps::MakeChannelCredentials(), args)));
    }
    return stubs[c].get();
  };
  std::map<int, int> codes;  // status code -> calls
  absl::Mutex mu;

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

  std::vector<std::unique_ptr<grpc::ClientContext>> ctxs;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<ps::v1::StreamRequest,
                                                       ps::v1::StreamResponse>>> streams;
  std::vector<std::unique_ptr<ps::v1::PullResponse>> pull_resps;
  int done = 0;
  if (scenario == "silent_pushes") {
    // A valid first chunk of fc1.weight (1 MB), then nothing.
    ps::v1::StreamRequest req;
    req.set_call_id(1);
    req.set_kind(ps::v1::CALL_PUSH);
    ps::v1::TensorSlice* s = req.add_gradients();
    s->set_name("fc1.weight");
    s->add_shape(784);
    s->add_shape(512);
    s->set_length(1 << 18);
    s->set_data(std::string(1 << 20, '\0'));
    for (int i = 0; i < count; ++i) {
      ctxs.push_back(std::make_unique<grpc::ClientContext>());
      streams.push_back(stub_for(i)->Stream(ctxs.back().get()));
      streams.back()->Write(req);
    }
  } else if (scenario == "waiting_pulls") {
    for (int i = 0; i < count; ++i) {
      ctxs.push_back(std::make_unique<grpc::ClientContext>());
      pull_resps.push_back(std::make_unique<ps::v1::PullResponse>());
      ps::v1::PullRequest req;
      req.set_min_version(1);  // worker 1 never pushes: waits until --pull_timeout
      stub_for(i)->async()->Pull(ctxs.back().get(), &req, pull_resps.back().get(),
                                 [&](grpc::Status st) {
                                   absl::MutexLock l(&mu);
                                   ++codes[st.error_code()];
                                   ++done;
                                 });
    }
  } else if (scenario == "huge_init") {
    ps::v1::InitRequest req;
    ps::v1::TensorSpec* t = req.mutable_spec()->add_tensors();
    t->set_name("huge");
    t->add_shape(1 << 28);  // 1 GiB of float32
    ps::v1::TensorSlice* v = req.add_values();
    v->set_name("huge");
    v->add_shape(1 << 28);
    v->set_length(1 << 28);
    v->set_data(std::string(4 << 20, '\0'));  // 4 MB of the declared 1 GiB
    grpc::ClientContext ctx;
    ps::v1::InitResponse resp;
    grpc::Status st = stub_for(0)->InitParams(&ctx, req, &resp);
    std::cout << "init: " << st.error_code() << " " << st.error_message() << std::endl;
  } else {
    std::cerr << "unknown --scenario\n";
    return 2;
  }
  // Let the server take it all in: until no call was answered for 2 s.
  for (int last = -1, quiet = 0, t = 0; quiet < 2 && t < 120; ++t) {
    absl::SleepFor(absl::Seconds(1));
    absl::MutexLock l(&mu);
    quiet = done == last ? quiet + 1 : 0;
    last = done;
  }
  {
    absl::MutexLock l(&mu);
    std::cout << "after " << count << " " << scenario << " (" << absl::Now() - start
              << "): " << Memory(pid) << "; calls already answered: " << done;
    for (auto [code, n] : codes) std::cout << " [code " << code << ": " << n << "]";
    std::cout << std::endl;
  }
  for (auto& c : ctxs) c->TryCancel();
  absl::SleepFor(absl::Seconds(1));
  std::cout << "after cancel: " << Memory(pid) << std::endl;
  streams.clear();
  return 0;
}
