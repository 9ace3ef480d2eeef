// What only the streaming transport has: a failed call leaves the stream
// usable, a pull that waits on a stream is dropped on the server when the
// client goes away, and a server that shuts down fails the calls waiting on
// it instead of leaving them hanging; a malformed embedding-rows call is
// answered with its error on the stream, which goes on. What both
// transports must do alike (tensors of many chunks arriving intact among
// them) is in transport_conformance_test.cc.
#include <cmath>
#include <cstring>
#include <string>
#include <vector>

#include "client/admin_client.h"
#include "common/embedding_shard.h"
#include "common/testing/wait_until.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

int64_t WaitingCalls(const TestCluster& cluster) {
  auto st = QueryStatus(cluster.addresses(), absl::Seconds(5));
  return st.ok() ? (*st)[0].waiting_calls() : -1;
}

// Polls (bounded) until the server reports `n` waiting calls.
bool AwaitWaitingCalls(const TestCluster& cluster, int64_t n) {
  const absl::Status s =
      WaitUntil([&] { return WaitingCalls(cluster) == n; }, absl::Seconds(30),
                absl::StrCat(n, " waiting calls on the server"), absl::Milliseconds(20));
  if (!s.ok()) ADD_FAILURE() << s;
  return s.ok();
}

// One sync shard of a 4-element tensor with 2 workers; worker 0 connected
// over the stream transport and initialized.
class StreamSync : public ::testing::Test {
 protected:
  void SetUp() override {
    auto c = cluster_.Connect(0, 2);
    ASSERT_TRUE(c.ok()) << c.status();
    client_ = *std::move(c);
    ASSERT_TRUE(client_->Init({{"w", {4}}}, &init_).ok());
  }

  TestCluster cluster_{1, 2, Mode::kSync, 0.5f};
  const TensorList init_ = {{1, 2, 3, 4}};
  std::unique_ptr<PsClient> client_;
};

TEST_F(StreamSync, AFailedCallLeavesTheStreamUsable) {
  TensorList grad = {{1, 1, 1, 1}};
  ASSERT_TRUE(client_->Push(grad).ok());
  // The same step twice is taken for a retry: answered, not applied again.
  ASSERT_TRUE(client_->Push(grad).ok());
  EXPECT_EQ(client_->LastPushOutcomes(), std::vector<PushOutcome>{PushOutcome::kDuplicate});
  TensorList bad = {{1, std::nanf(""), 1, 1}};
  absl::Status refused = client_->Push(bad);
  EXPECT_EQ(refused.code(), absl::StatusCode::kInvalidArgument) << refused;
  TensorList weights;
  EXPECT_TRUE(client_->Pull(0, &weights).ok());
  EXPECT_EQ(weights, init_);
}

TEST_F(StreamSync, WaitingPullIsDroppedWhenTheClientGoesAway) {
  TensorList weights;
  {
    std::unique_ptr<PendingOp> op = client_->PullAsync(1, &weights);  // never completes
    ASSERT_TRUE(AwaitWaitingCalls(cluster_, 1));
  }  // abandoning the op cancels it
  EXPECT_TRUE(AwaitWaitingCalls(cluster_, 0));
  // The client reconnects and keeps working.
  EXPECT_TRUE(client_->Pull(0, &weights).ok());
  client_.reset();  // closing the client closes its streams cleanly
  EXPECT_EQ(WaitingCalls(cluster_), 0);
}

TEST_F(StreamSync, ServerShutdownFailsWaitingCallsPromptly) {
  TensorList weights;
  std::unique_ptr<PendingOp> op = client_->PullAsync(1, &weights);  // waits for worker 1
  ASSERT_TRUE(AwaitWaitingCalls(cluster_, 1));
  EXPECT_TRUE(cluster_.server(0)->Shutdown().ok());
  // The status says who ended the pull, so no clock is needed: left waiting,
  // it would have ended at its wait timeout with DEADLINE_EXCEEDED, and
  // "shutting down" comes only from the shard failing its waiting calls.
  absl::Status s = op->Wait();
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_NE(s.message().find("shutting down"), absl::string_view::npos) << s;
  // That later calls to a server that is gone fail, naming the shard, is
  // checked for both transports in transport_conformance_test.cc.
}

TEST(StreamRows, ARowsCallDuringAnOperationInFlightFailsAndLeavesItRunning) {
  TestCluster cluster(1, 2, Mode::kSync, 0.5f);
  auto c = cluster.Connect(0, 2);
  ASSERT_TRUE(c.ok()) << c.status();
  std::unique_ptr<PsClient> client = *std::move(c);
  ASSERT_TRUE(client->DeclareTables({{"emb", 2, /*seed=*/1, /*init_scale=*/0.1f}}).ok());
  TensorList init = {{1, 2}};
  ASSERT_TRUE(client->Init({{"w", {2}}}, &init).ok());
  const std::vector<uint64_t> ids = {3, 4};
  std::vector<float> rows(ids.size() * 2);
  TensorList weights;
  {
    std::unique_ptr<PendingOp> op = client->PullAsync(1, &weights);  // waits for worker 1
    ASSERT_TRUE(AwaitWaitingCalls(cluster, 1));
    absl::Status s = client->PullRows("emb", ids, absl::MakeSpan(rows));
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
    EXPECT_NE(s.message().find("in flight"), std::string::npos) << s;
    EXPECT_EQ(WaitingCalls(cluster), 1);  // the pull still waits on its stream
  }  // abandoning the op cancels it
  EXPECT_TRUE(AwaitWaitingCalls(cluster, 0));
  EXPECT_TRUE(client->PullRows("emb", ids, absl::MakeSpan(rows)).ok());
}

// A raw stream to one shard: rows calls as PsClient would never send them.
class RawStream {
 public:
  explicit RawStream(const std::string& address)
      : stub_(v1::ParameterServer::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))),
        stream_(stub_->Stream(&ctx_)) {}

  // Sends `req` (call_id set here) and reads the call's responses up to
  // the last: its error, or OK with the rows concatenated into `rows` and
  // the last outcome in `outcome`.
  absl::Status Call(v1::StreamRequest req, std::string* rows = nullptr,
                    v1::PushOutcome* outcome = nullptr) {
    req.set_call_id(++call_id_);
    req.set_last(true);
    if (!stream_->Write(req)) return absl::UnavailableError("write failed");
    v1::StreamResponse resp;
    do {
      if (!stream_->Read(&resp)) return absl::UnavailableError("the stream ended");
      EXPECT_EQ(resp.call_id(), call_id_);
      if (rows != nullptr) rows->append(resp.rows());
      if (outcome != nullptr && resp.has_incarnation()) *outcome = resp.push_outcome();
    } while (!resp.last());
    return absl::Status(static_cast<absl::StatusCode>(resp.error_code()), resp.error_message());
  }

  // Sends `req` as it is and returns how the stream ended.
  grpc::Status SendAndFinish(const v1::StreamRequest& req) {
    stream_->Write(req);
    stream_->WritesDone();
    v1::StreamResponse resp;
    while (stream_->Read(&resp)) {
    }
    return stream_->Finish();
  }

 private:
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
  grpc::ClientContext ctx_;
  std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>> stream_;
  uint64_t call_id_ = 0;
};

v1::StreamRequest RowsCall(v1::CallKind kind, const std::string& table,
                           const std::vector<uint64_t>& ids, const std::vector<float>& grads = {},
                           int64_t seq = 0) {
  v1::StreamRequest req;
  req.set_kind(kind);
  req.set_worker_id(0);
  req.set_table(table);
  req.mutable_ids()->Add(ids.begin(), ids.end());
  req.set_row_grads(std::string(reinterpret_cast<const char*>(grads.data()),
                                grads.size() * sizeof(float)));
  req.set_seq(seq);
  return req;
}

TEST(StreamRows, AMalformedRowsCallIsAnsweredWithItsErrorAndTheStreamStaysUsable) {
  constexpr int kDim = 4;
  const TableSpec table{"emb", kDim, /*seed=*/7, /*init_scale=*/0.5f};
  ServerOptions o;
  o.shard.num_workers = 1;
  o.shard.mode = Mode::kAsync;
  o.shard.tables.optimizer.lr = 0.5f;
  absl::StatusOr<LocalServers> servers = LocalServers::Start(o, 2);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::unique_ptr<PsClient> client = ConnectWorker(*servers, 0, 1);
  ASSERT_TRUE(client);
  ASSERT_TRUE(client->DeclareTables({table}).ok());
  TensorList init = {{0, 0}};
  ASSERT_TRUE(client->Init({{"w", {2}}}, &init).ok());
  std::vector<uint64_t> mine, theirs;  // ids of shard 0 and shard 1
  for (uint64_t id = 0; mine.size() < 2 || theirs.empty(); ++id) {
    (ShardOfId(id, 2) == 0 ? mine : theirs).push_back(id);
  }

  RawStream raw(servers->addresses[0]);
  const auto expect = [](const absl::Status& s, absl::StatusCode code, const std::string& text) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(text), std::string::npos) << s;
  };
  expect(raw.Call(RowsCall(v1::CALL_PULL_ROWS, "emb", {theirs[0]})),
         absl::StatusCode::kInvalidArgument, "belongs to shard 1");
  expect(raw.Call(RowsCall(v1::CALL_PULL_ROWS, "nope", {mine[0]})), absl::StatusCode::kNotFound,
         "\"nope\"");
  expect(raw.Call(RowsCall(v1::CALL_PUSH_ROWS, "emb", {mine[0]}, std::vector<float>(kDim + 1),
                           /*seq=*/1)),
         absl::StatusCode::kInvalidArgument, "embedding table \"emb\"");
  v1::StreamRequest ragged = RowsCall(v1::CALL_PUSH_ROWS, "emb", {mine[0]}, {}, /*seq=*/1);
  ragged.set_row_grads("1234567");
  expect(raw.Call(ragged), absl::StatusCode::kInvalidArgument, "not whole float32s");

  // The same stream still answers: rows as created, a push applied once.
  std::string rows;
  ASSERT_TRUE(raw.Call(RowsCall(v1::CALL_PULL_ROWS, "emb", {mine[0], mine[1]}), &rows).ok());
  std::vector<float> want(2 * kDim);
  InitRow(table.seed, mine[0], kDim, table.init_scale, want.data());
  InitRow(table.seed, mine[1], kDim, table.init_scale, want.data() + kDim);
  ASSERT_EQ(rows.size(), want.size() * sizeof(float));
  EXPECT_EQ(std::memcmp(rows.data(), want.data(), rows.size()), 0);
  v1::PushOutcome outcome = v1::PUSH_DROPPED;
  const std::vector<float> g(kDim, 1.0f);
  ASSERT_TRUE(raw.Call(RowsCall(v1::CALL_PUSH_ROWS, "emb", {mine[0]}, g, /*seq=*/1), nullptr,
                       &outcome)
                  .ok());
  EXPECT_EQ(outcome, v1::PUSH_APPLIED);
  ASSERT_TRUE(raw.Call(RowsCall(v1::CALL_PUSH_ROWS, "emb", {mine[0]}, g, /*seq=*/1), nullptr,
                       &outcome)
                  .ok());
  EXPECT_EQ(outcome, v1::PUSH_DUPLICATE);

  // A rows call cut into two messages breaks the call protocol: the stream
  // ends, naming it.
  v1::StreamRequest cut = RowsCall(v1::CALL_PULL_ROWS, "emb", {mine[0]});
  cut.set_call_id(100);
  grpc::Status ended = raw.SendAndFinish(cut);
  EXPECT_EQ(ended.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << ended.error_message();
  EXPECT_NE(ended.error_message().find("never chunked"), std::string::npos)
      << ended.error_message();
}

}  // namespace
}  // namespace ps
