// Hostile requests for embedding rows: too many ids, rows
// of the wrong width, tables that do not exist or grow past --max_rows, and
// model specs whose tables are too many, too wide or badly named. Each gets
// a code and a message naming the table (or the limit), without the server
// allocating what the request asks for (the server runs in this process:
// its peak RSS is checked), and the shard keeps serving real workers. Part
// of //tests:hostile_requests_test; the fixture is tests/hostile_fixture.h.
#include <unistd.h>

#include <cstdint>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "server/core/sparse_tables.h"
#include "tests/hostile_fixture.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

using namespace hostile;  // NOLINT: the fixture and its helpers

// Peak RSS may grow by this much over a test's hostile calls.
constexpr int64_t kRssBound = int64_t{64} << 20;

class HostileRows : public Hostile {
 protected:
  grpc::Status PullRows(int worker, const std::string& table, const std::vector<uint64_t>& ids,
                        v1::PullRowsResponse* resp) {
    v1::PullRowsRequest req;
    req.set_worker_id(worker);
    req.set_table(table);
    req.mutable_ids()->Add(ids.begin(), ids.end());
    return stub_->PullRows(Context().get(), req, resp);
  }
  grpc::Status PushRows(int worker, const std::string& table, const std::vector<uint64_t>& ids,
                        std::string grads, int64_t seq = 0) {
    v1::PushRowsRequest req;
    req.set_worker_id(worker);
    req.set_table(table);
    req.mutable_ids()->Add(ids.begin(), ids.end());
    req.set_grads(std::move(grads));
    req.set_seq(seq);
    v1::PushRowsResponse resp;
    return stub_->PushRows(Context().get(), req, &resp);
  }
  grpc::Status PushPullRows(int worker, const std::string& table, const std::vector<uint64_t>& ids,
                            std::string grads) {
    v1::PushPullRowsRequest req;
    req.set_worker_id(worker);
    req.set_table(table);
    req.mutable_ids()->Add(ids.begin(), ids.end());
    req.set_grads(std::move(grads));
    v1::PushPullRowsResponse resp;
    return stub_->PushPullRows(Context().get(), req, &resp);
  }
  static std::vector<uint64_t> Ids(uint64_t first, uint64_t n) {
    std::vector<uint64_t> ids(n);
    for (uint64_t i = 0; i < n; ++i) ids[i] = first + i;
    return ids;
  }
  static void Expect(const grpc::Status& st, grpc::StatusCode code,
                     const std::vector<std::string>& says) {
    EXPECT_EQ(st.error_code(), code) << st.error_message();
    for (const std::string& s : says) EXPECT_THAT(st.error_message(), HasSubstr(s));
  }
  // The tables still serve: a small pull and push of `table` succeed.
  void ExpectRowsStillServe(const std::string& table, int dim) {
    v1::PullRowsResponse resp;
    grpc::Status st = PullRows(0, table, {1, 2}, &resp);
    ASSERT_TRUE(st.ok()) << st.error_message();
    EXPECT_EQ(resp.values().size(), 2 * dim * sizeof(float));
    st = PushRows(0, table, {1, 2}, Floats(std::vector<float>(2 * dim, 0.5f)));
    EXPECT_TRUE(st.ok()) << st.error_message();
  }
};

// The bug this found: PullRows allocated (and zero-filled) ids * dim floats
// for its answer before checking that the table had room for the rows, so a
// pull of 2^14 ids of a 4096-wide table at --max_rows touched 256 MB before
// it was refused; and nothing bounded the answer of a pull below protobuf's
// 2 GiB.
TEST_F(HostileRows, HugePullsAreRefusedBeforeAllocatingTheirAnswer) {
  ServerOptions o;
  o.shard.tables.max_rows = 100;
  Start(o, {TableSpec{"wide", 4096, 1}, TableSpec{"huge", 65536, 2}});
  const int64_t rss_before = PeakRssBytes();
  v1::PullRowsResponse resp;
  // 2^14 new rows of 16 KB: past --max_rows.
  Expect(PullRows(0, "wide", Ids(0, 1 << 14), &resp), grpc::StatusCode::RESOURCE_EXHAUSTED,
         {"embedding table \"wide\"", "max_rows 100"});
  // 2^13 rows of 256 KB: a 2 GiB answer, past the per-pull bound.
  Expect(PullRows(0, "huge", Ids(0, 1 << 13), &resp), grpc::StatusCode::RESOURCE_EXHAUSTED,
         {"embedding table \"huge\"", absl::StrCat(SparseTables::kMaxFloatsPerPull, " floats")});
  EXPECT_LT(PeakRssBytes() - rss_before, kRssBound);
  EXPECT_EQ(server_->shard()->Stats().version, 0);
  ExpectRowsStillServe("wide", 4096);
  ExpectStillTrains();
}

TEST_F(HostileRows, BadRowRequestsGetCodesNamingTheTable) {
  ServerOptions o;
  o.shard.mode = Mode::kAsync;  // rows applied on arrival: the table grows
  o.shard.num_workers = 2;
  o.shard.tables.max_rows = 100;
  o.shard.tables.max_ids_per_request = 1000;
  o.shard.spec_limits.max_model_elements = 1024;  // a small receive limit
  Start(o, {TableSpec{"emb", 4, 7}});
  const int64_t rss_before = PeakRssBytes();
  const std::string four = Floats({1, 2, 3, 4});
  v1::PullRowsResponse resp;
  using C = grpc::StatusCode;
  // Over --max_ids_per_request, both ways.
  Expect(PullRows(0, "emb", Ids(0, 1001), &resp), C::INVALID_ARGUMENT,
         {"embedding table \"emb\"", "1001 ids", "--max_ids_per_request"});
  Expect(PushRows(0, "emb", Ids(0, 1001), Floats(std::vector<float>(4004, 1.0f))),
         C::INVALID_ARGUMENT, {"embedding table \"emb\"", "--max_ids_per_request"});
  // Rows of the wrong width, and bytes that are not whole floats.
  Expect(PushRows(0, "emb", {1, 2}, four), C::INVALID_ARGUMENT,
         {"embedding table \"emb\"", "4 gradient floats for 2 ids of dim 4"});
  Expect(PushRows(0, "emb", {1}, "abcdefg"), C::INVALID_ARGUMENT,
         {"embedding table \"emb\"", "not whole float32s"});
  Expect(PushRows(0, "emb", {1}, Floats({1, 2, 3, std::numeric_limits<float>::infinity()})),
         C::INVALID_ARGUMENT, {"embedding table \"emb\"", "not finite"});
  // Tables that do not exist; names past every limit are escaped, not echoed whole.
  Expect(PullRows(0, "nope", {1}, &resp), C::NOT_FOUND,
         {"embedding table \"nope\" does not exist"});
  Expect(PushRows(0, "nope", {1}, four), C::NOT_FOUND, {"embedding table \"nope\""});
  Expect(PushRows(0, "", {1}, four), C::NOT_FOUND, {"embedding table \"\" does not exist"});
  grpc::Status long_name = PullRows(0, std::string(1 << 20, 'x'), {1}, &resp);
  Expect(long_name, C::NOT_FOUND, {"does not exist"});
  EXPECT_LT(long_name.error_message().size(), 1000u);
  // Worker ids, versions and seqs out of range.
  Expect(PushRows(2, "emb", {1}, four), C::INVALID_ARGUMENT, {"worker_id 2 is out of range"});
  Expect(PushRows(-1, "emb", {1}, four), C::INVALID_ARGUMENT, {"worker_id -1 is out of range"});
  Expect(PullRows(std::numeric_limits<int32_t>::max(), "emb", {1}, &resp), C::INVALID_ARGUMENT,
         {"is out of range"});
  Expect(PushRows(0, "emb", {1}, four, -5), C::INVALID_ARGUMENT,
         {"embedding table \"emb\"", "negative version or seq"});
  // Repeated ids: the set check must not be fooled by a long run of them.
  Expect(PushRows(0, "emb", std::vector<uint64_t>(1000, 9), Floats(std::vector<float>(4000, 1))),
         C::INVALID_ARGUMENT, {"embedding table \"emb\"", "id 9 appears twice"});
  // PushPullRows checks as PushRows does.
  Expect(PushPullRows(0, "emb", Ids(0, 1001), Floats(std::vector<float>(4004, 1.0f))),
         C::INVALID_ARGUMENT, {"embedding table \"emb\"", "--max_ids_per_request"});
  Expect(PushPullRows(0, "emb", {1, 2}, four), C::INVALID_ARGUMENT,
         {"embedding table \"emb\"", "4 gradient floats for 2 ids of dim 4"});
  Expect(PushPullRows(0, "emb", {1}, "abcdefg"), C::INVALID_ARGUMENT, {"not whole float32s"});
  Expect(PushPullRows(0, "nope", {1}, four), C::NOT_FOUND, {"embedding table \"nope\""});
  Expect(PushPullRows(2, "emb", {1}, four), C::INVALID_ARGUMENT, {"worker_id 2 is out of range"});
  Expect(
      PushPullRows(0, "emb", std::vector<uint64_t>(1000, 9), Floats(std::vector<float>(4000, 1))),
      C::INVALID_ARGUMENT, {"id 9 appears twice"});
  // 8 MB of gradients: past the receive limit, refused by gRPC.
  Expect(PushRows(0, "emb", {1}, std::string(8 << 20, '\0')), C::RESOURCE_EXHAUSTED, {});
  // The table grows to --max_rows and no further: the push that would pass
  // it changes nothing.
  for (uint64_t first = 0; first < 100; first += 50) {
    grpc::Status st = PushRows(0, "emb", Ids(first, 50), Floats(std::vector<float>(200, 0.1f)));
    ASSERT_TRUE(st.ok()) << st.error_message();
  }
  Expect(PushRows(0, "emb", Ids(95, 10), Floats(std::vector<float>(40, 0.1f))),
         C::RESOURCE_EXHAUSTED, {"embedding table \"emb\"", "5 new rows would pass max_rows 100"});
  Expect(PullRows(0, "emb", {100}, &resp), C::RESOURCE_EXHAUSTED,
         {"embedding table \"emb\"", "max_rows 100"});
  // Each row of the table pulls as it was pushed: the refused push created none.
  ASSERT_TRUE(PullRows(0, "emb", Ids(0, 100), &resp).ok());
  EXPECT_EQ(resp.values().size(), 400 * sizeof(float));
  EXPECT_LT(PeakRssBytes() - rss_before, kRssBound);
  ExpectRowsStillServe("emb", 4);
  ExpectStillTrains();
}

TEST_F(HostileRows, HugeOrMalformedTableSpecsAreRefusedNamingTheTable) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  auto s = PsServer::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  server_ = *std::move(s);
  stub_ = v1::ParameterServer::NewStub(
      grpc::CreateChannel(server_->address(), ps::MakeChannelCredentials()));
  const int64_t rss_before = PeakRssBytes();
  const auto init = [&](const std::vector<TableSpec>& tables) {
    v1::InitRequest req;
    req.set_worker_id(0);
    v1::TensorSpec* t = req.mutable_spec()->add_tensors();
    t->set_name("w");
    t->add_shape(2);
    for (const TableSpec& spec : tables) {
      v1::TableSpec* p = req.mutable_spec()->add_tables();
      p->set_name(spec.name);
      p->set_dim(spec.dim);
      p->set_seed(spec.seed);
      p->set_init_scale(spec.init_scale);
    }
    *req.add_values() = MakeTensorSlice("w", {2}, 0, 2, Floats({1, 2}));
    v1::InitResponse resp;
    return stub_->InitParams(Context().get(), req, &resp);
  };
  const auto many = [](int n, int dim) {
    std::vector<TableSpec> tables;
    for (int i = 0; i < n; ++i) tables.push_back(TableSpec{absl::StrCat("t", i), dim, 1});
    return tables;
  };
  using C = grpc::StatusCode;
  Expect(init(many(1025, 4)), C::INVALID_ARGUMENT, {"1025 embedding tables; at most 1024"});
  Expect(init({TableSpec{"wide", std::numeric_limits<int32_t>::max(), 1}}), C::INVALID_ARGUMENT,
         {"embedding table \"wide\"", "dim 2147483647 not in [1, 65536]"});
  Expect(init({TableSpec{"neg", std::numeric_limits<int32_t>::min(), 1}}), C::INVALID_ARGUMENT,
         {"embedding table \"neg\"", "dim -2147483648"});
  Expect(init({TableSpec{std::string(1 << 20, 'n'), 4, 1}}), C::INVALID_ARGUMENT,
         {"name of 1048576 bytes; at most 256"});
  Expect(init({TableSpec{"", 4, 1}}), C::INVALID_ARGUMENT, {"empty name"});
  Expect(init({TableSpec{"a", 4, 1}, TableSpec{"a", 4, 1}}), C::INVALID_ARGUMENT,
         {"embedding table \"a\"", "declared twice"});
  Expect(init({TableSpec{"nan", 4, 1, std::numeric_limits<float>::quiet_NaN()}}),
         C::INVALID_ARGUMENT, {"embedding table \"nan\"", "init_scale"});
  // None of those was declared.
  EXPECT_TRUE(server_->shard()->Tables().empty());
  // 1024 tables of the widest rows: their rows could never all fit, but
  // none exists until touched, so the spec is accepted without allocating
  // (a table's bound is --max_rows; a pull's, SparseTables::kMaxFloatsPerPull).
  grpc::Status st = init(many(1024, 65536));
  EXPECT_TRUE(st.ok()) << st.error_message();
  EXPECT_EQ(server_->shard()->Tables().size(), 1024u);
  v1::PullRowsResponse resp;
  Expect(PullRows(0, "t1023", Ids(0, (1 << 12) + 1), &resp), C::RESOURCE_EXHAUSTED,
         {"embedding table \"t1023\"", "per pull"});
  EXPECT_LT(PeakRssBytes() - rss_before, kRssBound);
  // A later spec must match: one that differs is refused, naming the table.
  Expect(init(many(1024, 8)), C::FAILED_PRECONDITION, {"t0"});
  ASSERT_TRUE(PullRows(0, "t5", {3}, &resp).ok());
  EXPECT_EQ(resp.values().size(), 65536 * sizeof(float));
}

}  // namespace
}  // namespace ps
