// Part of //tests:hostile_requests_test (once bad_requests_test): malformed
// or out-of-turn requests to an in-process sync cluster get an error status
// that names the problem, and the server keeps serving afterwards. The
// hostile requests over both transports are in hostile_requests_test.cc.
#include "gmock/gmock.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "rpc/credentials.h"
#include "tests/tensor_slice.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

class BadRequests : public ::testing::Test {
 protected:
  void SetUp() override {
    cluster_ = std::make_unique<TestCluster>(1, 2, Mode::kSync, 0.5f);
    channel_ = grpc::CreateChannel(cluster_->addresses()[0], ps::MakeChannelCredentials());
    stub_ = v1::ParameterServer::NewStub(channel_);
    v1::InitRequest init;
    init.set_worker_id(0);
    AddSpec(init.mutable_spec(), 4);
    AddSlice(init.add_values(), "w", {4}, 0, 4, std::string(16, '\0'));
    v1::InitResponse resp;
    ASSERT_TRUE(Call(&v1::ParameterServer::Stub::InitParams, init, &resp).ok());
  }

  static void AddSpec(v1::ModelSpec* spec, int64_t n) {
    v1::TensorSpec* t = spec->add_tensors();
    t->set_name("w");
    t->add_shape(n);
  }

  static void AddSlice(v1::TensorSlice* s, const std::string& name, std::vector<int64_t> shape,
                       int64_t offset, int64_t length, std::string data) {
    *s = MakeTensorSlice(name, shape, offset, length, std::move(data));
  }

  template <typename Req, typename Resp>
  grpc::Status Call(grpc::Status (v1::ParameterServer::Stub::*method)(grpc::ClientContext*,
                                                                      const Req&, Resp*),
                    const Req& req, Resp* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
    return (stub_.get()->*method)(&ctx, req, resp);
  }

  grpc::Status Push(int worker, int64_t version, const std::string& name,
                    std::vector<int64_t> shape, int64_t offset, int64_t length,
                    std::string data) {
    v1::PushRequest req;
    req.set_worker_id(worker);
    req.set_version(version);
    AddSlice(req.add_gradients(), name, shape, offset, length, std::move(data));
    v1::PushResponse resp;
    return Call(&v1::ParameterServer::Stub::Push, req, &resp);
  }

  // After every bad request: the server still answers status (still at
  // version 0: nothing bad was applied) and health.
  void ExpectStillServing() {
    v1::StatusResponse st;
    ASSERT_TRUE(Call(&v1::ParameterServer::Stub::GetStatus, v1::StatusRequest(), &st).ok());
    EXPECT_EQ(st.version(), 0);
    auto health = grpc::health::v1::Health::NewStub(channel_);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckResponse hr;
    ASSERT_TRUE(health->Check(&ctx, grpc::health::v1::HealthCheckRequest(), &hr).ok());
    EXPECT_EQ(hr.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  std::unique_ptr<TestCluster> cluster_;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST_F(BadRequests, WrongTensorSize) {
  // Data holds 3 floats for a 4-element slice.
  grpc::Status s = Push(0, 0, "w", {4}, 0, 4, std::string(12, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("3 float32 elements, expected 4"));
  // A slice range other than the one the shard owns.
  s = Push(0, 0, "w", {4}, 0, 3, std::string(12, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("owns [0, 4)"));
  // A shape other than the model's.
  s = Push(0, 0, "w", {5}, 0, 4, std::string(16, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("shape"));
  ExpectStillServing();
}

TEST_F(BadRequests, UnknownTensorName) {
  grpc::Status s = Push(0, 0, "nope", {4}, 0, 4, std::string(16, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("unknown tensor 'nope'"));
  ExpectStillServing();
}

TEST_F(BadRequests, BytesNotAMultipleOfFour) {
  grpc::Status s = Push(0, 0, "w", {4}, 0, 4, std::string(15, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("not a multiple of 4"));
  ExpectStillServing();
}

TEST_F(BadRequests, PushForWrongStepInSyncMode) {
  grpc::Status s = Push(0, 5, "w", {4}, 0, 4, std::string(16, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("step 5"));
  EXPECT_THAT(s.error_message(), HasSubstr("step 0"));
  ExpectStillServing();
}

TEST_F(BadRequests, WorkerIdOutOfRange) {
  grpc::Status s = Push(7, 0, "w", {4}, 0, 4, std::string(16, '\0'));
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("worker_id 7"));
  ExpectStillServing();
}

TEST_F(BadRequests, InitWithMismatchedSpec) {
  v1::InitRequest init;
  init.set_worker_id(1);
  AddSpec(init.mutable_spec(), 8);
  v1::InitResponse resp;
  grpc::Status s = Call(&v1::ParameterServer::Stub::InitParams, init, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION);
  EXPECT_THAT(s.error_message(), HasSubstr("created as w[4]"));
  EXPECT_THAT(s.error_message(), HasSubstr("w[8]"));
  ExpectStillServing();
}

TEST_F(BadRequests, RegisterWithWrongWorkerCount) {
  v1::RegisterRequest req;
  req.set_worker_id(0);
  req.set_num_workers(3);
  v1::RegisterResponse resp;
  grpc::Status s = Call(&v1::ParameterServer::Stub::Register, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(s.error_message(), HasSubstr("num_workers=2"));
  ExpectStillServing();
}

TEST_F(BadRequests, PullThatTimesOutNamesMissingWorkers) {
  // Worker 1 pushed step 0; worker 0 never does.
  ASSERT_TRUE(Push(1, 0, "w", {4}, 0, 4, std::string(16, '\0')).ok());
  v1::PullRequest req;
  req.set_worker_id(1);
  req.set_min_version(1);
  req.set_wait_timeout_ms(300);
  v1::PullResponse resp;
  grpc::Status s = Call(&v1::ParameterServer::Stub::Pull, req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::DEADLINE_EXCEEDED);
  EXPECT_THAT(s.error_message(), HasSubstr("missing gradients from workers [0]"));
  ExpectStillServing();
  // The step still completes when worker 0 shows up.
  ASSERT_TRUE(Push(0, 0, "w", {4}, 0, 4, std::string(16, '\0')).ok());
  v1::StatusResponse st;
  ASSERT_TRUE(Call(&v1::ParameterServer::Stub::GetStatus, v1::StatusRequest(), &st).ok());
  EXPECT_EQ(st.version(), 1);
}

}  // namespace
}  // namespace ps
