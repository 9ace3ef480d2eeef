// The sync rows calls of the protocol, made raw over both transports
// against a real in-process server: a PushPullRows held for its step that
// answers the rows of the step's close (and what became of its push), and
// a PullRows with min_version that answers at the close it names. Both
// wait while the step's dense pushes arrive, and a wait that runs out ends
// with DEADLINE_EXCEEDED and leaves nothing waiting on the shard. The
// fixture is tests/hostile_fixture.h (one shard, raw stubs, a real client).
#include <cstdint>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/testing/wait_until.h"
#include "gtest/gtest.h"
#include "tests/hostile_fixture.h"

namespace ps {
namespace {

using namespace hostile;  // NOLINT: the fixture and its helpers

constexpr int kDim = 4;

// What a rows call answered, from either transport.
struct RowsAnswer {
  absl::Status status = absl::UnknownError("no answer");
  int64_t version = -1;
  v1::PushOutcome outcome = v1::PUSH_APPLIED;
  std::string rows;  // float32 bytes
};

std::vector<float> AsFloats(const std::string& bytes) {
  std::vector<float> out(bytes.size() / sizeof(float));
  memcpy(out.data(), bytes.data(), out.size() * sizeof(float));
  return out;
}

class SyncRows : public Hostile {
 protected:
  void SetUp() override {
    ServerOptions o;
    o.shard.mode = Mode::kSync;
    o.shard.num_workers = 2;
    o.shard.optimizer.learning_rate = 0.5f;
    o.shard.tables.optimizer = {SparseOptimizerKind::kSgd, 0.5f};
    Start(o, {TableSpec{"emb", kDim, 7, 0.1f}});
    worker1_ = Connect(1);
    ASSERT_NE(worker1_, nullptr);
    ASSERT_TRUE(worker1_->DeclareTables({TableSpec{"emb", kDim, 7, 0.1f}}).ok());
    ASSERT_TRUE(worker1_->Init(kSpec, nullptr).ok());
  }

  // A rows call as one stream call: `req` with its call id, kind and fields
  // set; the answer's messages read to the last.
  RowsAnswer OverStream(v1::StreamRequest req) {
    RowsAnswer a;
    auto ctx = Context();
    auto rw = stub_->Stream(ctx.get());
    req.set_call_id(1);
    req.set_last(true);
    if (!rw->Write(req)) return a;
    v1::StreamResponse resp;
    bool first = true;
    while (rw->Read(&resp)) {
      if (first) a.outcome = resp.push_outcome();
      first = false;
      a.version = resp.version();
      a.rows += resp.rows();
      a.status =
          absl::Status(static_cast<absl::StatusCode>(resp.error_code()), resp.error_message());
      if (resp.last()) break;
    }
    rw->WritesDone();
    rw->Finish().ok();
    return a;
  }

  RowsAnswer PushPullRows(const std::string& transport, int64_t step,
                          const std::vector<uint64_t>& ids, const std::vector<float>& grads,
                          int64_t wait_ms = 0) {
    if (transport == "stream") {
      v1::StreamRequest req;
      req.set_kind(v1::CALL_PUSH_PULL_ROWS);
      req.set_worker_id(0);
      req.set_version(step);
      req.set_table("emb");
      for (uint64_t id : ids) req.add_ids(id);
      req.set_row_grads(Floats(grads));
      req.set_wait_timeout_ms(wait_ms);
      return OverStream(req);
    }
    v1::PushPullRowsRequest req;
    req.set_worker_id(0);
    req.set_table("emb");
    req.mutable_ids()->Add(ids.begin(), ids.end());
    req.set_grads(Floats(grads));
    req.set_version(step);
    req.set_wait_timeout_ms(wait_ms);
    v1::PushPullRowsResponse resp;
    grpc::Status s = stub_->PushPullRows(Context().get(), req, &resp);
    RowsAnswer a;
    a.status = absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    a.version = resp.version();
    a.outcome = resp.outcome();
    a.rows = resp.values();
    return a;
  }

  RowsAnswer PullRowsAt(const std::string& transport, int64_t min_version,
                        const std::vector<uint64_t>& ids, int64_t wait_ms = 0) {
    if (transport == "stream") {
      v1::StreamRequest req;
      req.set_kind(v1::CALL_PULL_ROWS);
      req.set_worker_id(1);
      req.set_table("emb");
      for (uint64_t id : ids) req.add_ids(id);
      req.set_min_version(min_version);
      req.set_wait_timeout_ms(wait_ms);
      return OverStream(req);
    }
    v1::PullRowsRequest req;
    req.set_worker_id(1);
    req.set_table("emb");
    req.mutable_ids()->Add(ids.begin(), ids.end());
    req.set_min_version(min_version);
    req.set_wait_timeout_ms(wait_ms);
    v1::PullRowsResponse resp;
    grpc::Status s = stub_->PullRows(Context().get(), req, &resp);
    RowsAnswer a;
    a.status = absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
    a.version = resp.version();
    a.rows = resp.values();
    return a;
  }

  std::vector<float> RowsNow(const std::vector<uint64_t>& ids) {
    std::vector<float> out(ids.size() * kDim);
    EXPECT_TRUE(client_->PullRows("emb", ids, absl::MakeSpan(out)).ok());
    return out;
  }

  std::unique_ptr<PsClient> worker1_;
};

TEST_F(SyncRows, RowsCallsWaitForTheStepAndAnswerItsClose) {
  const std::vector<uint64_t> mine = {1, 2}, theirs = {2, 3};
  const std::vector<float> g = {1, 1, 1, 1, 2, 2, 2, 2};
  int64_t step = 0;
  for (const char* transport : kTransports) {
    SCOPED_TRACE(transport);
    const std::vector<float> before = RowsNow(mine);
    RowsAnswer pushed, pulled;
    std::thread a([&] { pushed = PushPullRows(transport, step, mine, g); });
    std::thread b([&] { pulled = PullRowsAt(transport, step + 1, theirs); });
    ASSERT_EQ(WaitUntil([this] { return server_->shard()->Stats().waiting_calls == 2; },
                        absl::Seconds(10), "both rows calls waiting"),
              absl::OkStatus());
    // Worker 1's rows join the step too; then both dense pushes close it.
    ASSERT_TRUE(worker1_->PushRows("emb", {uint64_t{2}}, {4, 4, 4, 4}).ok());
    ASSERT_TRUE(UnaryPush(0, step, Good(0.5f)).ok());
    ASSERT_TRUE(UnaryPush(1, step, Good(0.5f)).ok());
    a.join();
    b.join();
    ASSERT_TRUE(pushed.status.ok()) << pushed.status;
    ASSERT_TRUE(pulled.status.ok()) << pulled.status;
    EXPECT_EQ(pushed.version, step + 1);
    EXPECT_EQ(pulled.version, step + 1);
    EXPECT_EQ(pushed.outcome, v1::PUSH_APPLIED);
    const std::vector<float> after = RowsNow(mine);
    EXPECT_EQ(AsFloats(pushed.rows), after);
    EXPECT_NE(after, before);
    // The step's mean over 2 workers at lr 0.5: id 1 moved by 0.5 * 1 / 2.
    EXPECT_FLOAT_EQ(after[0], before[0] - 0.25f);
    EXPECT_EQ(AsFloats(pulled.rows), RowsNow(theirs));
    ++step;
    TensorList weights;  // worker 1's client learns the step
    ASSERT_TRUE(worker1_->Pull(step, &weights).ok());
  }
  // A wait that runs out: DEADLINE_EXCEEDED, and nothing left waiting.
  for (const char* transport : kTransports) {
    SCOPED_TRACE(transport);
    EXPECT_EQ(PullRowsAt(transport, step + 1, mine, 100).status.code(),
              absl::StatusCode::kDeadlineExceeded);
    EXPECT_EQ(PushPullRows(transport, step, mine, g, 100).status.code(),
              absl::StatusCode::kDeadlineExceeded);
  }
  AwaitNoWaitingCalls();
  // A push for a step not open yet is refused at once, naming the step.
  RowsAnswer ahead = PushPullRows("unary", step + 3, mine, g);
  EXPECT_EQ(ahead.status.code(), absl::StatusCode::kFailedPrecondition) << ahead.status;
}

}  // namespace
}  // namespace ps
