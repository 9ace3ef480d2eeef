// The fixture of //tests:hostile_requests_test (hostile_requests_test.cc):
// one in-process shard with its own options, raw gRPC stubs and a real
// client for it, and the model of the hostile-input review (with embedding
// tables if a test asks). Test-only.
#ifndef PS_TESTS_HOSTILE_FIXTURE_H_
#define PS_TESTS_HOSTILE_FIXTURE_H_

#include <unistd.h>

#include <cmath>
#include <limits>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/ps_client.h"
#include "common/testing/wait_until.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "server/ps_server.h"
#include "tests/tensor_slice.h"
#include "tools/process/proc.h"

namespace ps {
namespace hostile {

inline constexpr int64_t kI64Max = std::numeric_limits<int64_t>::max();
inline constexpr int64_t kI64Min = std::numeric_limits<int64_t>::min();

// The model of the report: fc1.bias of 10 elements, plus a weight.
inline const ModelSpec kSpec = {{"fc1.weight", {4, 10}}, {"fc1.bias", {10}}};

// This process's peak RSS (VmHWM) in bytes: the in-process server's
// allocations show there. A test failure if it cannot be read.
inline int64_t PeakRssBytes() {
  const absl::StatusOr<int64_t> bytes = ProcStatusBytes(getpid(), "VmHWM");
  EXPECT_TRUE(bytes.ok()) << bytes.status();
  return bytes.ok() ? *bytes : 0;
}

inline std::string Floats(std::vector<float> v) {
  return std::string(reinterpret_cast<const char*>(v.data()), v.size() * sizeof(float));
}

// One async or sync shard with its own options, and raw clients for it.
class Hostile : public ::testing::Test {
 protected:
  // `tables`: embedding tables worker 0 declares with the model.
  void Start(ServerOptions o, const std::vector<TableSpec>& tables = {}) {
    o.listen = "127.0.0.1:0";
    auto s = PsServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
    channel_ = grpc::CreateChannel(server_->address(), ps::MakeChannelCredentials());
    stub_ = v1::ParameterServer::NewStub(channel_);
    // Worker 0 creates the model with a real client.
    client_ = Connect(0);
    ASSERT_NE(client_, nullptr);
    if (!tables.empty()) {
      ASSERT_TRUE(client_->DeclareTables(tables).ok());
    }
    TensorList init = {std::vector<float>(40, 1.0f), std::vector<float>(10, 1.0f)};
    ASSERT_TRUE(client_->Init(kSpec, &init).ok());
  }

  void StartDefault(Mode mode = Mode::kAsync, int workers = 1) {
    ServerOptions o;
    o.shard.mode = mode;
    o.shard.num_workers = workers;
    o.shard.optimizer.learning_rate = 0.5f;
    Start(o);
  }

  std::unique_ptr<PsClient> Connect(int worker,
                                    ClientOptions::Transport t = ClientOptions::Transport::kStream) {
    ClientOptions co;
    co.servers = {server_->address()};
    co.worker_id = worker;
    co.num_workers = server_->shard()->options().num_workers;
    co.transport = t;
    co.wait_timeout = absl::Seconds(5);
    auto c = PsClient::Connect(co);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  std::unique_ptr<grpc::ClientContext> Context(int seconds = 10) {
    auto ctx = std::make_unique<grpc::ClientContext>();
    ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(seconds));
    return ctx;
  }

  static void AddSlice(v1::TensorSlice* s, const std::string& name, std::vector<int64_t> shape,
                       int64_t offset, int64_t length, std::string data) {
    *s = MakeTensorSlice(name, shape, offset, length, std::move(data));
  }

  // A whole push of `slices` as one unary call.
  grpc::Status UnaryPush(int worker, int64_t version, const std::vector<v1::TensorSlice>& slices) {
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_version(version);
    for (const v1::TensorSlice& s : slices) *req.add_gradients() = s;
    v1::PushResponse resp;
    return stub_->Push(Context().get(), req, &resp);
  }

  // The same push as one stream call: one message per slice, the last one
  // marked. Returns the call's error (from its StreamResponse) or the
  // stream's status.
  absl::Status StreamPush(int worker, int64_t version, const std::vector<v1::TensorSlice>& slices) {
    auto ctx = Context();
    auto rw = stub_->Stream(ctx.get());
    for (size_t i = 0; i < slices.size(); ++i) {
      v1::StreamRequest req;
      req.set_call_id(1);
      req.set_kind(v1::CALL_PUSH);
      req.set_worker_id(worker);
      req.set_version(version);
      *req.add_gradients() = slices[i];
      req.set_last(i + 1 == slices.size());
      if (!rw->Write(req)) break;
    }
    rw->WritesDone();
    v1::StreamResponse resp;
    absl::Status call = absl::UnknownError("no response");
    if (rw->Read(&resp)) {
      call = absl::Status(static_cast<absl::StatusCode>(resp.error_code()), resp.error_message());
    }
    grpc::Status st = rw->Finish();
    if (!st.ok()) return absl::Status(static_cast<absl::StatusCode>(st.error_code()), st.error_message());
    return call;
  }

  // Push over `transport` ("unary" or "stream").
  absl::Status PushOver(const std::string& transport, int worker, int64_t version,
                        const std::vector<v1::TensorSlice>& slices) {
    if (transport == "stream") return StreamPush(worker, version, slices);
    grpc::Status s = UnaryPush(worker, version, slices);
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
  }

  // A well-formed gradient of `value` everywhere, as slices.
  std::vector<v1::TensorSlice> Good(float value) {
    std::vector<v1::TensorSlice> out(2);
    AddSlice(&out[0], "fc1.weight", {4, 10}, 0, 40, Floats(std::vector<float>(40, value)));
    AddSlice(&out[1], "fc1.bias", {10}, 0, 10, Floats(std::vector<float>(10, value)));
    return out;
  }

  int64_t Version() { return server_->shard()->Stats().version; }

  // The server drops waits of calls that ended (bounded poll: the client
  // can see its call end before the server has processed it).
  void AwaitNoWaitingCalls() {
    EXPECT_EQ(WaitUntil([this] { return server_->shard()->Stats().waiting_calls == 0; },
                        absl::Seconds(10), "no waiting calls on the shard"),
              absl::OkStatus());
  }

  // A real worker still trains: a push-pull over each transport applies.
  void ExpectStillTrains() {
    for (auto t : {ClientOptions::Transport::kStream, ClientOptions::Transport::kUnary}) {
      std::unique_ptr<PsClient> c = Connect(0, t);
      ASSERT_NE(c, nullptr);
      ASSERT_TRUE(c->Init(kSpec, nullptr).ok());
      TensorList w;
      ASSERT_TRUE(c->Pull(0, &w).ok());
      const int64_t before = Version();
      TensorList g = {std::vector<float>(40, 0.0f), std::vector<float>(10, 0.0f)};
      absl::Status s = c->PushPull(g, &w);
      ASSERT_TRUE(s.ok()) << s;
      EXPECT_GT(Version(), before);
    }
    EXPECT_EQ(server_->shard()->Stats().waiting_calls, 0);
  }

  std::unique_ptr<PsServer> server_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  std::unique_ptr<PsClient> client_;
};

inline const char* const kTransports[] = {"unary", "stream"};

}  // namespace hostile
}  // namespace ps

#endif  // PS_TESTS_HOSTILE_FIXTURE_H_
