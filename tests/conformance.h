// The transport conformance tests' fixture and helpers, shared by
// transport_conformance_test.cc (float32) and
// transport_bf16_conformance_test.cc (the bf16 wire): real in-process
// servers on 127.0.0.1 or on unix sockets (a 0700 folder under
// TEST_TMPDIR), clients of either transport, values exact by construction
// (small integers and half-integers, lr 1/2, means of 2). Test-only.
#ifndef PS_TESTS_CONFORMANCE_H_
#define PS_TESTS_CONFORMANCE_H_

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "common/bf16.h"
#include "gtest/gtest.h"
#include "tests/test_cluster.h"
#include "tests/unix_socket_dir.h"

namespace ps {
namespace conformance {

inline constexpr float kLr = 0.5f;
// Generous bound on calls that must fail rather than hang; the timeouts they
// run under are a few seconds at most.
inline constexpr absl::Duration kNoHang = absl::Seconds(60);

// Spans every layout case: a matrix, a vector, a scalar, and a tensor smaller
// than the shard count.
inline const ModelSpec kSpec = {{"w", {5, 3}}, {"b", {7}}, {"s", {}}, {"t", {2}}};

// Small integers, different for every element and every `seed`.
inline TensorList Values(const ModelSpec& spec, int seed) {
  TensorList out;
  for (const TensorSpec& t : spec) {
    std::vector<float> v(t.num_elements());
    for (size_t i = 0; i < v.size(); ++i) v[i] = float((seed * 7 + int(i) * 3) % 17 - 8);
    out.push_back(std::move(v));
  }
  return out;
}

#define ASSERT_OK(expr)                  \
  do {                                   \
    const absl::Status s_ = (expr);      \
    ASSERT_TRUE(s_.ok()) << #expr << ": " << s_; \
  } while (0)

// Values(spec, seed) plus a different multiple of 1/1024 for every element:
// exact in float32 (at most 14 significant bits) but not in bf16 (8).
inline TensorList Fine(const ModelSpec& spec, int seed) {
  TensorList out = Values(spec, seed);
  for (std::vector<float>& v : out) {
    for (size_t i = 0; i < v.size(); ++i) v[i] += float((seed * 5 + int(i) * 11) % 63 + 1) / 1024;
  }
  return out;
}

// Every value rounded to bf16 (common/bf16.h): what a bf16 wire delivers.
inline TensorList RoundedToBf16(TensorList values) {
  for (std::vector<float>& v : values) {
    for (float& x : v) x = RoundToBf16(x);
  }
  return values;
}

// w - lr * mean(grads), the mean summed in the order given.
inline TensorList SgdStep(TensorList w, const std::vector<TensorList>& grads) {
  for (size_t t = 0; t < w.size(); ++t) {
    for (size_t i = 0; i < w[t].size(); ++i) {
      float sum = 0;
      for (const TensorList& g : grads) sum += g[t][i];
      w[t][i] -= kLr * (sum / float(grads.size()));
    }
  }
  return w;
}

// The ways to push a gradient and pull the next weights.
enum class Via {
  kPushPull,
  kPushPullAsync,
  kStartPushPullAllAtOnce,
  kStartPushPullInReverse,
  kViews,
  kStartPushPullViews,
};
// Each with the name SCOPED_TRACE shows.
inline const std::pair<Via, const char*> kAllVias[] = {
    {Via::kPushPull, "PushPull"},
    {Via::kPushPullAsync, "PushPullAsync"},
    {Via::kStartPushPullAllAtOnce, "StartPushPull, one Send of every tensor"},
    {Via::kStartPushPullInReverse, "StartPushPull, one Send per tensor, last first"},
    {Via::kViews, "PushPull of views into the caller's weights"},
    {Via::kStartPushPullViews, "StartPushPull of views, Send(index, values), last first"},
};

inline absl::Status PushPullVia(Via via, PsClient* client, const TensorList& grads, TensorList* weights) {
  switch (via) {
    case Via::kPushPull:
      return client->PushPull(grads, weights);
    case Via::kPushPullAsync:
      return client->PushPullAsync(grads, weights)->Wait();
    case Via::kStartPushPullAllAtOnce:
    case Via::kStartPushPullInReverse: {
      std::unique_ptr<PushPullInProgress> p = client->StartPushPull(&grads, weights);
      std::vector<int> all;
      for (int i = 0; i < static_cast<int>(grads.size()); ++i) all.push_back(i);
      if (via == Via::kStartPushPullAllAtOnce) {
        p->Send(all);
      } else {
        for (auto i = all.rbegin(); i != all.rend(); ++i) p->Send({*i});
      }
      return p->Wait();
    }
    case Via::kViews:
    case Via::kStartPushPullViews: {
      // The caller owns the weights' memory, sized from the spec.
      weights->resize(client->spec().size());
      for (size_t i = 0; i < weights->size(); ++i) {
        (*weights)[i].resize(client->spec()[i].num_elements());
      }
      if (via == Via::kViews) return client->PushPull(ConstViewsOf(grads), ViewsOf(weights));
      std::unique_ptr<PushPullInProgress> p = client->StartPushPull(ViewsOf(weights));
      for (int i = static_cast<int>(grads.size()); i-- > 0;) p->Send(i, grads[i]);
      return p->Wait();
    }
  }
  return absl::InternalError("unknown Via");
}

// A client transport over a kind of address.
struct Setup {
  ClientOptions::Transport transport;
  bool unix_socket;  // unix:PATH addresses instead of 127.0.0.1:PORT
};

inline std::string SetupName(const ::testing::TestParamInfo<Setup>& info) {
  return absl::StrCat(info.param.transport == ClientOptions::Transport::kStream ? "stream"
                                                                                : "unary",
                      info.param.unix_socket ? "_unix" : "_tcp");
}

class Conformance : public ::testing::TestWithParam<Setup> {
 protected:
  Conformance() {
    if (GetParam().unix_socket) sockets_.emplace();
  }

  // `shards` servers for `workers` workers in `mode`, on this setup's
  // addresses.
  TestCluster MakeCluster(int shards, int workers, Mode mode) const {
    return TestCluster(shards, workers, mode, kLr, absl::Seconds(60),
                       sockets_.has_value() ? sockets_->via() : std::string());
  }

  ClientOptions Options(const TestCluster& cluster, int worker, int workers) const {
    return cluster.ClientOptionsFor(worker, workers, GetParam().transport);
  }

  // A client connected with `options`; null (and a failure) on error.
  std::unique_ptr<PsClient> Connect(const ClientOptions& options) const {
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(options);
    EXPECT_TRUE(c.ok()) << c.status();
    return c.ok() ? *std::move(c) : nullptr;
  }

  using Workers = std::vector<std::unique_ptr<PsClient>>;

  // Servers and their workers, every worker initialized.
  struct Running {
    std::unique_ptr<TestCluster> cluster;
    Workers workers;  // empty if starting failed
  };

  // `shards` servers in `mode` and `workers` clients initialized with `spec`,
  // worker 0 creating the parameters from `init`; worker w's wire is
  // dtypes[w] (f32 past the end). On error, a failure and no workers.
  Running Start(int shards, int workers, Mode mode, const ModelSpec& spec, const TensorList& init,
                const std::vector<WireDtype>& dtypes = {}) const {
    Running out;
    out.cluster = std::make_unique<TestCluster>(MakeCluster(shards, workers, mode));
    for (int w = 0; w < workers; ++w) {
      ClientOptions o = Options(*out.cluster, w, workers);
      if (w < static_cast<int>(dtypes.size())) o.wire_dtype = dtypes[w];
      std::unique_ptr<PsClient> c = Connect(o);
      absl::Status s = c == nullptr ? absl::UnavailableError("not connected")
                                    : c->Init(spec, w == 0 ? &init : nullptr);
      EXPECT_TRUE(s.ok()) << "worker " << w << ": " << s;
      if (!s.ok()) {
        out.workers.clear();
        return out;
      }
      out.workers.push_back(std::move(c));
    }
    return out;
  }

  // Runs `body` once for each way of pushing, each time on 2 fresh servers
  // in `mode` with 2 workers initialized with kSpec and `init` (wires as in
  // Start).
  void ForEachVia(Mode mode, const TensorList& init,
                  const std::function<void(Via, const Workers&)>& body,
                  const std::vector<WireDtype>& dtypes = {}) const {
    for (const auto& [via, name] : kAllVias) {
      SCOPED_TRACE(name);
      Running run = Start(2, 2, mode, kSpec, init, dtypes);
      if (run.workers.size() != 2) return;  // Start reported the failure
      body(via, run.workers);
    }
  }

  std::optional<UnixSocketDir> sockets_;  // the unix setups' folder
};

// The four setups: each transport over TCP and over a unix socket.
inline auto AllSetups() {
  return ::testing::Values(Setup{ClientOptions::Transport::kStream, false},
                           Setup{ClientOptions::Transport::kUnary, false},
                           Setup{ClientOptions::Transport::kStream, true},
                           Setup{ClientOptions::Transport::kUnary, true});
}

}  // namespace conformance
}  // namespace ps

#endif  // PS_TESTS_CONFORMANCE_H_
