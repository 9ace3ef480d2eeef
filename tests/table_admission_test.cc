// Feature admission (--table_admission) through real servers and PsClient:
// a row is made at its id's Nth pull; until then pulls answer its initial
// value and its gradients are dropped. Bit for bit, the rows pulled are
// those of servers without admission that never got the dropped gradients,
// in async and in sync steps; /metrics counts what was refused and dropped.
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "server/core/admission.h"
#include "tests/metrics_sum.h"
#include "tests/table_client.h"
#include "tests/test_cluster.h"

namespace ps {
namespace {

constexpr int kDim = 4;
const TableSpec kTable{"ads", kDim, /*seed=*/5, /*init_scale=*/0.5f};

ServerOptions Base(Mode mode, const std::string& admission) {
  ServerOptions o;
  o.metrics_listen = "127.0.0.1:0";
  o.shard.num_workers = 1;
  o.shard.mode = mode;
  o.shard.optimizer.learning_rate = 0.1f;
  o.shard.tables.optimizer.kind = SparseOptimizerKind::kAdagrad;
  o.shard.tables.optimizer.lr = 0.05f;
  EXPECT_TRUE(ParseAdmissionKind(admission, &o.shard.tables.admission).ok());
  return o;
}

std::unique_ptr<PsClient> Connect(const LocalServers& servers) {
  return ConnectTableClient(servers, kTable);
}

double Sample(const LocalServers& s, const std::string& name, const std::string& labels = "") {
  return SumMetric(s, name + "{table=\"ads\"" + labels + "}");
}

class TableAdmissionTest : public ::testing::TestWithParam<Mode> {};

TEST_P(TableAdmissionTest, RowsAreThoseOfServersThatNeverGotTheDroppedGradients) {
  absl::StatusOr<LocalServers> plain = LocalServers::Start(Base(GetParam(), "none"), 2);
  absl::StatusOr<LocalServers> admits = LocalServers::Start(Base(GetParam(), "count:3"), 2);
  ASSERT_TRUE(plain.ok()) << plain.status();
  ASSERT_TRUE(admits.ok()) << admits.status();
  std::unique_ptr<PsClient> a = Connect(*plain), b = Connect(*admits);
  ASSERT_TRUE(a && b);
  std::mt19937_64 rng(3);
  std::map<uint64_t, int> pulls;  // by id, pulls so far
  int64_t refused = 0, dropped = 0;
  for (int step = 0; step < 40; ++step) {
    std::vector<uint64_t> ids;  // distinct and sorted: 10 hot ids, then a long tail
    for (uint64_t id = 0; id < 400; ++id) {
      if ((id < 10 && rng() % 2 == 0) || rng() % 40 == 0) ids.push_back(id);
    }
    std::vector<float> grads(ids.size() * kDim);
    for (float& g : grads) g = static_cast<float>(static_cast<int>(rng() % 201) - 100) / 100;
    // What servers that admit at the 3rd pull keep: the plain servers get
    // only those gradients.
    std::vector<uint64_t> kept_ids;
    std::vector<float> kept_grads;
    for (size_t i = 0; i < ids.size(); ++i) {
      if (++pulls[ids[i]] >= 3) {
        kept_ids.push_back(ids[i]);
        kept_grads.insert(kept_grads.end(), grads.begin() + i * kDim,
                          grads.begin() + (i + 1) * kDim);
      } else {
        ++refused;
        ++dropped;
      }
    }
    std::vector<float> ra(grads.size()), rb(grads.size());
    ASSERT_TRUE(a->PullRows("ads", ids, absl::MakeSpan(ra)).ok());
    ASSERT_TRUE(b->PullRows("ads", ids, absl::MakeSpan(rb)).ok());
    for (size_t i = 0; i < ra.size(); ++i) {
      ASSERT_EQ(ra[i], rb[i]) << "step " << step << " id " << ids[i / kDim];
    }
    if (!kept_ids.empty()) {
      ASSERT_TRUE(a->PushRows("ads", kept_ids, kept_grads).ok());
    }
    ASSERT_TRUE(b->PushRows("ads", ids, grads).ok());
    if (GetParam() == Mode::kSync) {  // the step closes with the dense push
      for (PsClient* c : {a.get(), b.get()}) {
        TensorList dense = {std::vector<float>(4, 0.0f)}, weights;
        ASSERT_TRUE(c->PushPull(dense, &weights).ok());
      }
    }
  }
  int64_t admitted = 0, waiting = 0;
  for (const auto& [id, n] : pulls) ++(n >= 3 ? admitted : waiting);
  EXPECT_EQ(Sample(*admits, "ps_server_embedding_rows"), admitted);
  EXPECT_EQ(Sample(*plain, "ps_server_embedding_rows"), pulls.size());
  EXPECT_EQ(Sample(*admits, "ps_server_embedding_lookups_total", ",where=\"not_admitted\""),
            refused);
  EXPECT_EQ(Sample(*admits, "ps_server_embedding_lookups_total", ",where=\"none\""), admitted);
  EXPECT_EQ(Sample(*admits, "ps_server_embedding_dropped_gradients_total"), dropped);
  EXPECT_EQ(Sample(*admits, "ps_server_embedding_admission_pending_ids"), waiting);
  EXPECT_GT(Sample(*admits, "ps_server_embedding_admission_memory_bytes"), 0);
  EXPECT_EQ(Sample(*plain, "ps_server_embedding_dropped_gradients_total"), 0);
  EXPECT_GT(admitted, 10);
  EXPECT_GT(waiting, 50);
}

INSTANTIATE_TEST_SUITE_P(Modes, TableAdmissionTest, ::testing::Values(Mode::kAsync, Mode::kSync),
                         [](const ::testing::TestParamInfo<Mode>& m) {
                           return std::string(ModeName(m.param));
                         });

}  // namespace
}  // namespace ps
