// The client against a hostile or broken server: pull replies whose chunk
// ranges overflow, overlap or fall short, over both transports, are errors
// naming the shard (INTERNAL), never a crash or a write out of bounds; a
// server reporting a mode the client does not know is refused at Connect.
#include <limits>
#include <memory>
#include <string>

#include "client/ps_client.h"
#include "gmock/gmock.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "tests/tensor_slice.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

const ModelSpec kSpec = {{"fc1.bias", {10}}};

// A server that registers and inits like a real one, then answers every pull
// with `weights` (unary and stream alike).
class LyingServer final : public v1::ParameterServer::Service {
 public:
  explicit LyingServer(std::vector<v1::TensorSlice> weights, v1::Mode mode = v1::MODE_ASYNC)
      : weights_(std::move(weights)), mode_(mode) {}

  grpc::Status Register(grpc::ServerContext*, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    resp->set_mode(mode_);
    resp->set_num_workers(req->num_workers());
    resp->set_num_shards(1);
    return grpc::Status::OK;
  }
  grpc::Status InitParams(grpc::ServerContext*, const v1::InitRequest*,
                          v1::InitResponse*) override {
    return grpc::Status::OK;
  }
  grpc::Status Pull(grpc::ServerContext*, const v1::PullRequest*,
                    v1::PullResponse* resp) override {
    for (const v1::TensorSlice& s : weights_) *resp->add_weights() = s;
    return grpc::Status::OK;
  }
  grpc::Status Stream(
      grpc::ServerContext*,
      grpc::ServerReaderWriter<v1::StreamResponse, v1::StreamRequest>* stream) override {
    v1::StreamRequest req;
    while (stream->Read(&req)) {
      if (!req.last()) continue;
      for (size_t i = 0; i < weights_.size(); ++i) {
        v1::StreamResponse resp;
        resp.set_call_id(req.call_id());
        *resp.add_weights() = weights_[i];
        resp.set_last(i + 1 == weights_.size());
        stream->Write(resp);
      }
    }
    return grpc::Status::OK;
  }

 private:
  const std::vector<v1::TensorSlice> weights_;
  const v1::Mode mode_;
};

v1::TensorSlice Slice(int64_t offset, int64_t length, size_t bytes) {
  return MakeTensorSlice("fc1.bias", {10}, offset, length, std::string(bytes, '\0'));
}

class HostileServer : public ::testing::TestWithParam<ClientOptions::Transport> {
 protected:
  // Serves `service` on a free loopback port; the options of a client of it
  // over this test's transport.
  std::unique_ptr<grpc::Server> Serve(LyingServer* service, ClientOptions* co) {
    int port = 0;
    grpc::ServerBuilder b;
    b.AddListeningPort("127.0.0.1:0", *ps::MakeServerCredentials(ps::SecurityOptions(), nullptr),
                       &port);
    b.RegisterService(service);
    std::unique_ptr<grpc::Server> server = b.BuildAndStart();
    EXPECT_NE(port, 0);
    co->servers = {"127.0.0.1:" + std::to_string(port)};
    co->transport = GetParam();
    co->rpc_timeout = absl::Seconds(10);
    co->wait_timeout = absl::Seconds(10);
    return server;
  }

  // A client (asking for weights in `asked`) pulling `reply` from a lying
  // server gets INTERNAL naming the shard and the tensor.
  void ExpectPullFails(const std::vector<v1::TensorSlice>& reply, WireDtype asked) {
    LyingServer service(reply);
    ClientOptions co;
    std::unique_ptr<grpc::Server> server = Serve(&service, &co);
    ASSERT_NE(server, nullptr);
    co.wire_dtype = asked;
    auto client = PsClient::Connect(co);
    ASSERT_TRUE(client.ok()) << client.status();
    TensorList init = {std::vector<float>(10, 1.0f)};
    ASSERT_TRUE((*client)->Init(kSpec, &init).ok());
    TensorList weights;
    absl::Status s = (*client)->Pull(0, &weights);
    EXPECT_EQ(s.code(), absl::StatusCode::kInternal) << s;
    EXPECT_THAT(std::string(s.message()), HasSubstr("shard 0"));
    EXPECT_THAT(std::string(s.message()), HasSubstr("fc1.bias"));
    client->reset();
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
};

TEST_P(HostileServer, BadPullRepliesAreErrorsNamingTheShard) {
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  const std::vector<std::vector<v1::TensorSlice>> replies = {
      // The overflowing ranges of the server-side report, sent to the client.
      {Slice(0, 1, 4), Slice(1, kMax, 36), Slice(std::numeric_limits<int64_t>::min(), 0, 0)},
      {Slice(0, 5, 20), Slice(0, 5, 20)},   // the same range twice
      {Slice(0, 5, 20)},                     // short
      {Slice(0, 10, 36)},                    // too few bytes
      {Slice(5, 5, 20), Slice(0, 5, 20)},   // out of order
      {Slice(-4, 14, 56)},                   // before the start
  };
  for (const auto& reply : replies) ExpectPullFails(reply, WireDtype::kF32);
}

// The bf16 wire: weights whose bytes are not 2 * length, or whose dtype is
// unknown, are errors naming the shard and the tensor, whatever the client
// asked for.
TEST_P(HostileServer, BadBf16PullRepliesAreErrorsNamingTheShard) {
  auto bf16 = [](v1::TensorSlice s, int dtype) {
    s.set_dtype(static_cast<v1::WireDtype>(dtype));
    return s;
  };
  const std::vector<std::vector<v1::TensorSlice>> replies = {
      {bf16(Slice(0, 10, 40), v1::BF16)},  // float32 bytes labelled bf16
      {bf16(Slice(0, 10, 18), v1::BF16)},  // too few bytes
      {bf16(Slice(0, 10, 21), v1::BF16)},  // odd
      {bf16(Slice(0, 10, 20), 9)},         // unknown dtype
      {bf16(Slice(0, 5, 10), v1::BF16), bf16(Slice(5, 5, 20), v1::BF16)},  // second one bad
  };
  for (WireDtype asked : {WireDtype::kF32, WireDtype::kBf16}) {
    for (const auto& reply : replies) ExpectPullFails(reply, asked);
  }
}

// Before, the client took any mode other than async for sync.
TEST_P(HostileServer, UnknownModeIsRefusedAtConnect) {
  for (v1::Mode mode : {v1::MODE_UNSPECIFIED, static_cast<v1::Mode>(42)}) {
    LyingServer service({}, mode);
    ClientOptions co;
    std::unique_ptr<grpc::Server> server = Serve(&service, &co);
    ASSERT_NE(server, nullptr);
    auto client = PsClient::Connect(co);
    EXPECT_EQ(client.status().code(), absl::StatusCode::kInvalidArgument) << client.status();
    EXPECT_THAT(std::string(client.status().message()), HasSubstr(co.servers[0]));
    EXPECT_THAT(std::string(client.status().message()), HasSubstr("sync, async"));
    server->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, HostileServer,
                         ::testing::Values(ClientOptions::Transport::kStream,
                                           ClientOptions::Transport::kUnary),
                         [](const auto& info) {
                           return info.param == ClientOptions::Transport::kStream ? "stream"
                                                                                  : "unary";
                         });

}  // namespace
}  // namespace ps
