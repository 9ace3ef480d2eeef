// Embedding rows through real servers and PsClient, on both transports'
// clients: PullRows and PushRows with repeated ids in any order, sync steps
// that apply rows with the dense gradients (bit for bit as a local table
// fed the step's mean), async dedup of a retried push, and the errors that
// name the table. The stream parameter carries the rows on the streams (the
// servers count no unary rows call), the unary one in PullRows / PushRows.
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "client/sparse_ids.h"
#include "common/embedding_shard.h"
#include "grpcpp/create_channel.h"
#include "gtest/gtest.h"
#include "proto/ps.grpc.pb.h"
#include "server/core/embedding_table.h"
#include "tests/metrics_sum.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kDim = 4;
const TableSpec kTable{"emb", kDim, /*seed=*/7, /*init_scale=*/0.5f};

ServerOptions Base(Mode mode, int workers, SparseOptimizerKind kind = SparseOptimizerKind::kSgd) {
  ServerOptions o;
  o.shard.num_workers = workers;
  o.shard.mode = mode;
  o.shard.optimizer.learning_rate = 0.1f;
  o.shard.tables.optimizer.kind = kind;
  o.shard.tables.optimizer.lr = 0.5f;
  return o;
}

std::unique_ptr<PsClient> Worker(const LocalServers& servers, int w, int workers,
                                 ClientOptions::Transport transport) {
  ClientOptions o;
  o.servers = servers.addresses;
  o.worker_id = w;
  o.num_workers = workers;
  o.transport = transport;
  o.wait_timeout = absl::Seconds(30);
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(o);
  EXPECT_TRUE(c.ok()) << c.status();
  if (!c.ok()) return nullptr;
  EXPECT_TRUE((*c)->DeclareTables({kTable}).ok());
  return *std::move(c);
}

// The ids worker w touches at step t: repeats and any order on purpose.
std::vector<uint64_t> IdsOf(int w, int t) {
  return {uint64_t(t % 3), 100 + uint64_t(w), uint64_t(t % 3), 5000000000ull + t, 42, 1};
}
float GradOf(int w, int t, size_t i, int j) {
  return 0.01f * (w + 1) * (t + 1) + 0.001f * i - 0.002f * j;
}

// The rows a worker pulled back, position by position, equal `expect`'s rows.
void ExpectRows(const std::vector<float>& got, const std::vector<uint64_t>& ids,
                EmbeddingTable* expect) {
  std::vector<float> want(ids.size() * kDim);
  ASSERT_TRUE(expect->Pull(ids, want.data()).ok());
  for (size_t i = 0; i < want.size(); ++i) {
    EXPECT_EQ(got[i], want[i]) << "id " << ids[i / kDim] << " element " << i % kDim;
  }
}

class RowsTest : public ::testing::TestWithParam<ClientOptions::Transport> {};

TEST_P(RowsTest, SyncStepsApplyTheMeanOfTheWorkersRowsBitForBit) {
  constexpr int kWorkers = 2, kSteps = 6;
  absl::StatusOr<LocalServers> servers =
      LocalServers::Start(Base(Mode::kSync, kWorkers, SparseOptimizerKind::kAdagrad), 2);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::vector<std::unique_ptr<PsClient>> c;
  for (int w = 0; w < kWorkers; ++w) c.push_back(Worker(*servers, w, kWorkers, GetParam()));
  ASSERT_TRUE(c[0] && c[1]);
  const ModelSpec spec = {{"w", {8}}};
  TensorList init = {std::vector<float>(8, 1.0f)};
  ASSERT_TRUE(c[0]->Init(spec, &init).ok());
  ASSERT_TRUE(c[1]->Init(spec, nullptr).ok());

  // The reference: one local table with the servers' settings, fed each
  // step's mean gradient (summed in worker order, divided by 2).
  EmbeddingTableOptions ro;
  ro.name = kTable.name;
  ro.dim = kDim;
  ro.seed = kTable.seed;
  ro.init_scale = kTable.init_scale;
  ro.optimizer.kind = SparseOptimizerKind::kAdagrad;
  ro.optimizer.lr = 0.5f;
  auto ref = EmbeddingTable::Create(ro);
  ASSERT_TRUE(ref.ok());

  // Odd steps push the rows with PushPullRowsAsync, waited on after the
  // step's PushPull: the rows it answers are those of the closed step.
  std::vector<std::vector<float>> pulled(kWorkers), pushpulled(kWorkers);
  for (int t = 0; t < kSteps; ++t) {
    std::vector<std::thread> threads;
    for (int w = 0; w < kWorkers; ++w) {
      threads.emplace_back([&, w] {
        const std::vector<uint64_t> ids = IdsOf(w, t);
        pulled[w].assign(ids.size() * kDim, 0);
        pushpulled[w].assign(ids.size() * kDim, 0);
        ASSERT_TRUE(c[w]->PullRows("emb", ids, absl::MakeSpan(pulled[w])).ok());
        std::vector<float> g(ids.size() * kDim);
        for (size_t i = 0; i < ids.size(); ++i)
          for (int j = 0; j < kDim; ++j) g[i * kDim + j] = GradOf(w, t, i, j);
        std::unique_ptr<PendingOp> rows;
        if (t % 2 == 1) {
          rows = c[w]->PushPullRowsAsync("emb", ids, g, absl::MakeSpan(pushpulled[w]));
        } else {
          ASSERT_TRUE(c[w]->PushRows("emb", ids, g).ok());
        }
        EXPECT_EQ(c[w]->PushRows("emb", ids, g).code(), absl::StatusCode::kFailedPrecondition);
        TensorList grads = {std::vector<float>(8, 0.5f)}, weights;
        ASSERT_TRUE(c[w]->PushPull(grads, &weights).ok());
        if (rows) ASSERT_TRUE(rows->Wait().ok());
      });
    }
    for (auto& th : threads) th.join();
    for (int w = 0; w < kWorkers; ++w) ExpectRows(pulled[w], IdsOf(w, t), ref->get());
    // The step's mean, as the servers make it: per worker the rows of a
    // repeated id summed in caller order, then worker 0's + worker 1's, / 2.
    std::map<uint64_t, std::vector<float>> sum;
    for (int w = 0; w < kWorkers; ++w) {
      std::map<uint64_t, std::vector<float>> mine;
      const std::vector<uint64_t> ids = IdsOf(w, t);
      for (size_t i = 0; i < ids.size(); ++i) {
        auto [it, added] = mine.emplace(ids[i], std::vector<float>(kDim));
        for (int j = 0; j < kDim; ++j) {
          it->second[j] = added ? GradOf(w, t, i, j) : it->second[j] + GradOf(w, t, i, j);
        }
      }
      for (auto& [id, g] : mine) {
        auto [it, added] = sum.emplace(id, g);
        if (!added)
          for (int j = 0; j < kDim; ++j) it->second[j] += g[j];
      }
    }
    std::vector<uint64_t> ids;
    std::vector<float> mean;
    for (auto& [id, g] : sum) {
      ids.push_back(id);
      for (float v : g) mean.push_back(v / 2.0f);
    }
    ASSERT_TRUE((*ref)->Apply(ids, mean.data()).ok());
    if (t % 2 == 1) {
      for (int w = 0; w < kWorkers; ++w) ExpectRows(pushpulled[w], IdsOf(w, t), ref->get());
    }
  }
  // After the last step: every row the workers touched is the reference's.
  for (int w = 0; w < kWorkers; ++w) {
    const std::vector<uint64_t> ids = IdsOf(w, kSteps);
    std::vector<float> got(ids.size() * kDim);
    ASSERT_TRUE(c[w]->PullRows("emb", ids, absl::MakeSpan(got)).ok());
    ExpectRows(got, ids, ref->get());
  }
  // A row never pushed is its initial value, from (seed, id) alone.
  std::vector<float> fresh(kDim), init_row(kDim);
  const uint64_t id = 123456789;
  ASSERT_TRUE(c[0]->PullRows("emb", {&id, 1}, absl::MakeSpan(fresh)).ok());
  InitRow(kTable.seed, id, kDim, kTable.init_scale, init_row.data());
  EXPECT_EQ(fresh, init_row);
}

// The servers' count of unary `method` calls answered OK
// (grpc_server_handled_total on /metrics, summed over the servers).
double UnaryCallsOk(const LocalServers& servers, const std::string& method) {
  return SumMetric(
      servers, "grpc_server_handled_total{grpc_service=\"ps.v1.ParameterServer\",grpc_method=\"" +
                   method + "\",grpc_type=\"unary\",grpc_code=\"OK\"}");
}

TEST_P(RowsTest, AsyncAppliesRowsOnArrival) {
  ServerOptions o = Base(Mode::kAsync, 1);
  o.metrics_listen = "127.0.0.1:0";
  absl::StatusOr<LocalServers> servers = LocalServers::Start(o, 3);
  ASSERT_TRUE(servers.ok()) << servers.status();
  std::unique_ptr<PsClient> c = Worker(*servers, 0, 1, GetParam());
  ASSERT_TRUE(c);
  TensorList init = {std::vector<float>(3, 0.0f)};
  ASSERT_TRUE(c->Init({{"w", {3}}}, &init).ok());
  std::vector<uint64_t> ids;
  for (uint64_t i = 0; i < 64; ++i) ids.push_back(i * 7919);
  std::vector<float> before(ids.size() * kDim), after(ids.size() * kDim);
  ASSERT_TRUE(c->PullRows("emb", ids, absl::MakeSpan(before)).ok());
  std::vector<float> g(ids.size() * kDim, 1.0f);
  ASSERT_TRUE(c->PushRows("emb", ids, g).ok());
  ASSERT_TRUE(c->PullRows("emb", ids, absl::MakeSpan(after)).ok());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_EQ(after[i], before[i] - 0.5f * 1.0f);
  // Each transport carries the rows itself: the stream's client makes no
  // unary PullRows or PushRows call; the unary client makes one per shard.
  if (GetParam() == ClientOptions::Transport::kStream) {
    EXPECT_EQ(UnaryCallsOk(*servers, "PullRows"), 0);
    EXPECT_EQ(UnaryCallsOk(*servers, "PushRows"), 0);
  } else {
    EXPECT_EQ(UnaryCallsOk(*servers, "PullRows"), 2 * 3);
    EXPECT_EQ(UnaryCallsOk(*servers, "PushRows"), 3);
  }
}

// PushPullRows: one call per shard on each transport, the rows after the
// push (as PushRows then PullRows give them), repeated ids summed in caller
// order and copied back to each position, large answers whole; refused in
// sync with a message that says what to do instead.
TEST_P(RowsTest, PushPullRowsAnswersTheRowsAfterThePushInOneCall) {
  for (Mode mode : {Mode::kAsync, Mode::kSsp}) {
    ServerOptions o = Base(mode, 1);
    o.metrics_listen = "127.0.0.1:0";
    absl::StatusOr<LocalServers> servers = LocalServers::Start(o, 3);
    ASSERT_TRUE(servers.ok()) << servers.status();
    std::unique_ptr<PsClient> c = Worker(*servers, 0, 1, GetParam());
    ASSERT_TRUE(c);
    TensorList init = {std::vector<float>(3, 0.0f)};
    ASSERT_TRUE(c->Init({{"w", {3}}}, &init).ok());
    const std::vector<uint64_t> ids = IdsOf(0, 1);  // repeats, any order
    std::vector<float> before(ids.size() * kDim), got(ids.size() * kDim), g(ids.size() * kDim);
    for (size_t i = 0; i < ids.size(); ++i) {
      for (int j = 0; j < kDim; ++j) g[i * kDim + j] = GradOf(0, 1, i, j);
    }
    ASSERT_TRUE(c->PullRows("emb", ids, absl::MakeSpan(before)).ok());
    ASSERT_TRUE(c->PushPullRows("emb", ids, g, absl::MakeSpan(got)).ok());
    // The reference: the same SGD on a local table from the same rows.
    EmbeddingTableOptions to;
    to.name = "emb";
    to.dim = kDim;
    to.seed = kTable.seed;
    to.init_scale = kTable.init_scale;
    to.optimizer = {SparseOptimizerKind::kSgd, 0.5f};
    auto expect = EmbeddingTable::Create(to);
    ASSERT_TRUE(expect.ok());
    absl::StatusOr<SparseRequest> req = GroupIds(ids, 1);
    ASSERT_TRUE(req.ok());
    absl::StatusOr<std::vector<std::vector<float>>> sums = SumGradients(*req, g.data(), kDim);
    ASSERT_TRUE(sums.ok());
    ASSERT_TRUE((*expect)->Apply(req->shard_ids[0], (*sums)[0].data()).ok());
    ExpectRows(got, ids, expect->get());
    int shards_with_ids = 0;
    absl::StatusOr<SparseRequest> by_shard = GroupIds(ids, 3);
    ASSERT_TRUE(by_shard.ok());
    for (const auto& list : by_shard->shard_ids) shards_with_ids += list.empty() ? 0 : 1;
    EXPECT_EQ(UnaryCallsOk(*servers, "PushPullRows"),
              GetParam() == ClientOptions::Transport::kStream ? 0 : shards_with_ids);
  }
  absl::StatusOr<LocalServers> sync = LocalServers::Start(Base(Mode::kSync, 1), 1);
  ASSERT_TRUE(sync.ok()) << sync.status();
  std::unique_ptr<PsClient> c = Worker(*sync, 0, 1, GetParam());
  ASSERT_TRUE(c);
  TensorList init = {std::vector<float>(3, 0.0f)};
  ASSERT_TRUE(c->Init({{"w", {3}}}, &init).ok());
  std::vector<float> g(kDim, 1.0f), out(kDim);
  absl::Status s = c->PushPullRows("emb", {uint64_t{5}}, g, absl::MakeSpan(out));
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("use PushPullRowsAsync"), absl::string_view::npos) << s;
}

// Rows past one stream message's ~1 MB come back in several, in order.
TEST_P(RowsTest, LargePullsComeBackWhole) {
  absl::StatusOr<LocalServers> servers = LocalServers::Start(Base(Mode::kAsync, 1), 2);
  ASSERT_TRUE(servers.ok()) << servers.status();
  ClientOptions co;
  co.servers = servers->addresses;
  co.worker_id = 0;
  co.num_workers = 1;
  co.transport = GetParam();
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(co);
  ASSERT_TRUE(c.ok()) << c.status();
  const TableSpec wide{"wide", 256, /*seed=*/3, /*init_scale=*/1.0f};
  // Past one piece of the server's answer too (8,192 ids a piece): a
  // narrow table's 40,000 ids come back whole, pulled and push-pulled.
  const TableSpec narrow{"narrow", 4, /*seed=*/5, /*init_scale=*/1.0f};
  ASSERT_TRUE((*c)->DeclareTables({wide, narrow}).ok());
  TensorList init = {std::vector<float>(2, 0.0f)};
  ASSERT_TRUE((*c)->Init({{"w", {2}}}, &init).ok());
  std::vector<uint64_t> many;
  for (uint64_t i = 0; i < 40000; ++i) many.push_back(i * 13 + 1);
  std::vector<float> rows(many.size() * narrow.dim), again(many.size() * narrow.dim);
  std::vector<float> zero(many.size() * narrow.dim, 0.0f), row(narrow.dim);
  std::vector<uint64_t> ids;  // ~2.5 MB of rows per shard
  for (uint64_t i = 0; i < 5000; ++i) ids.push_back(i * 31 + 7);
  std::vector<float> got(ids.size() * wide.dim), want(wide.dim);
  ASSERT_TRUE((*c)->PullRows("wide", ids, absl::MakeSpan(got)).ok());
  for (size_t i = 0; i < ids.size(); ++i) {
    InitRow(wide.seed, ids[i], wide.dim, wide.init_scale, want.data());
    for (int j = 0; j < wide.dim; ++j) {
      ASSERT_EQ(got[i * wide.dim + j], want[j]) << "id " << ids[i] << " element " << j;
    }
  }
  ASSERT_TRUE((*c)->PullRows("narrow", many, absl::MakeSpan(rows)).ok());
  ASSERT_TRUE((*c)->PushPullRows("narrow", many, zero, absl::MakeSpan(again)).ok());
  for (size_t i = 0; i < many.size(); ++i) {
    InitRow(narrow.seed, many[i], narrow.dim, narrow.init_scale, row.data());
    for (int j = 0; j < narrow.dim; ++j) {
      ASSERT_EQ(rows[i * narrow.dim + j], row[j]) << "id " << many[i] << " element " << j;
      ASSERT_EQ(again[i * narrow.dim + j], row[j]) << "id " << many[i] << " element " << j;
    }
  }
}

INSTANTIATE_TEST_SUITE_P(Transports, RowsTest, AllTransports(), TransportName);

absl::Status FromGrpcStatus(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// Raw calls to one shard, for what PsClient never sends.
class RawRows {
 public:
  explicit RawRows(const std::string& address)
      : stub_(v1::ParameterServer::NewStub(
            grpc::CreateChannel(address, grpc::InsecureChannelCredentials()))) {}

  absl::StatusOr<v1::PushRowsResponse> Push(const std::string& table,
                                            const std::vector<uint64_t>& ids,
                                            const std::vector<float>& grads, int64_t seq,
                                            int64_t version = 0) {
    v1::PushRowsRequest req;
    req.set_table(table);
    req.mutable_ids()->Add(ids.begin(), ids.end());
    req.set_grads(
        std::string(reinterpret_cast<const char*>(grads.data()), grads.size() * sizeof(float)));
    req.set_seq(seq);
    req.set_version(version);
    v1::PushRowsResponse resp;
    grpc::ClientContext ctx;
    absl::Status s = FromGrpcStatus(stub_->PushRows(&ctx, req, &resp));
    if (!s.ok()) return s;
    return resp;
  }
  absl::StatusOr<std::vector<float>> Pull(const std::string& table,
                                          const std::vector<uint64_t>& ids) {
    v1::PullRowsRequest req;
    req.set_table(table);
    req.mutable_ids()->Add(ids.begin(), ids.end());
    v1::PullRowsResponse resp;
    grpc::ClientContext ctx;
    absl::Status s = FromGrpcStatus(stub_->PullRows(&ctx, req, &resp));
    if (!s.ok()) return s;
    std::vector<float> out(resp.values().size() / sizeof(float));
    memcpy(out.data(), resp.values().data(), resp.values().size());
    return out;
  }
  absl::Status Declare(const TableSpec& t) {
    v1::InitRequest req;
    req.mutable_spec()->add_tensors()->set_name("w");
    req.mutable_spec()->mutable_tensors(0)->add_shape(2);
    v1::TableSpec* p = req.mutable_spec()->add_tables();
    p->set_name(t.name);
    p->set_dim(t.dim);
    p->set_seed(t.seed);
    p->set_init_scale(t.init_scale);
    req.set_wait_timeout_ms(1);
    v1::InitResponse resp;
    grpc::ClientContext ctx;
    return FromGrpcStatus(stub_->InitParams(&ctx, req, &resp));
  }

 private:
  std::unique_ptr<v1::ParameterServer::Stub> stub_;
};

TEST(Rows, AsyncRetriedPushIsADuplicate) {
  absl::StatusOr<LocalServers> servers = LocalServers::Start(Base(Mode::kAsync, 1), 1);
  ASSERT_TRUE(servers.ok()) << servers.status();
  RawRows raw(servers->addresses[0]);
  raw.Declare(kTable).IgnoreError();  // waits for worker 0's values: times out, tables stay
  const std::vector<float> g(kDim, 1.0f);
  auto first = raw.Push("emb", {9}, g, /*seq=*/1);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->outcome(), v1::PUSH_APPLIED);
  auto again = raw.Push("emb", {9}, g, /*seq=*/1);
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->outcome(), v1::PUSH_DUPLICATE);
  std::vector<float> init(kDim);
  InitRow(kTable.seed, 9, kDim, kTable.init_scale, init.data());
  auto row = raw.Pull("emb", {9});
  ASSERT_TRUE(row.ok());
  for (int j = 0; j < kDim; ++j) EXPECT_EQ((*row)[j], init[j] - 0.5f);  // applied once
}

TEST(Rows, BadRequestsNameTheTable) {
  ServerOptions o = Base(Mode::kAsync, 1);
  o.shard.tables.max_ids_per_request = 4;
  o.shard.tables.max_rows = 6;
  absl::StatusOr<LocalServers> servers = LocalServers::Start(o, 2);
  ASSERT_TRUE(servers.ok()) << servers.status();
  RawRows raw(servers->addresses[0]);
  raw.Declare(kTable).IgnoreError();
  std::vector<uint64_t> mine, theirs;  // ids of shard 0 and shard 1
  for (uint64_t id = 0; mine.size() < 8 || theirs.empty(); ++id) {
    (ShardOfId(id, 2) == 0 ? mine : theirs).push_back(id);
  }
  const auto expect = [](const absl::Status& s, absl::StatusCode code, const std::string& text) {
    EXPECT_EQ(s.code(), code) << s;
    EXPECT_NE(s.message().find(text), std::string::npos) << s;
  };
  expect(raw.Pull("nope", {mine[0]}).status(), absl::StatusCode::kNotFound,
         "embedding table \"nope\" does not exist");
  expect(raw.Pull("emb", {theirs[0]}).status(), absl::StatusCode::kInvalidArgument,
         "belongs to shard 1");
  expect(raw.Pull("emb", {mine[0], mine[0]}).status(), absl::StatusCode::kInvalidArgument,
         "appears twice");
  expect(raw.Pull("emb", {mine[0], mine[1], mine[2], mine[3], mine[4]}).status(),
         absl::StatusCode::kInvalidArgument, "at most 4");
  expect(raw.Push("emb", {mine[0]}, std::vector<float>(kDim + 1), 1).status(),
         absl::StatusCode::kInvalidArgument, "embedding table \"emb\"");
  expect(raw.Push("emb", {mine[0]}, {1, 2, 3, std::numeric_limits<float>::quiet_NaN()}, 1).status(),
         absl::StatusCode::kInvalidArgument, "not finite");
  ASSERT_TRUE(raw.Pull("emb", {mine[0], mine[1], mine[2], mine[3]}).ok());
  ASSERT_TRUE(raw.Pull("emb", {mine[4], mine[5]}).ok());
  expect(raw.Pull("emb", {mine[6]}).status(), absl::StatusCode::kResourceExhausted, "emb");
  // A spec that disagrees with the declared tables.
  TableSpec other = kTable;
  other.dim = 8;
  expect(raw.Declare(other), absl::StatusCode::kFailedPrecondition, "emb");
}

}  // namespace
}  // namespace ps
