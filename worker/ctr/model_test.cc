#include "worker/ctr/model.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <map>
#include <memory>
#include <set>
#include <vector>

#include "absl/types/span.h"
#include "common/embedding_shard.h"
#include "gtest/gtest.h"
#include "worker/ctr/data.h"

namespace ps {
namespace {

// A tiny model over a batch with many repeated ids (3 ids a feature), its
// rows in a map, and the summed cross-entropy of the batch as the loss.
class TinyProblem {
 public:
  TinyProblem() {
    CtrModelConfig config;
    config.dim = 3;
    config.hidden = {5, 4};
    config.seed = 7;
    model_ = std::make_unique<CtrModel>(CtrModel::Create(config).value());
    CtrGeneratorOptions options;
    options.vocab_sizes = {3};
    options.num_examples = 100;
    auto generator = CtrGenerator::Create(options).value();
    for (int i = 0; i < 4; ++i) batch_.push_back(generator->Example(i));
    for (const CtrExample& e : batch_) {
      labels_.push_back(e.label);
      for (uint64_t id : e.ids) {
        if (rows_.count(id) == 0) {
          rows_[id].resize(config.dim);
          InitRow(3, id, config.dim, 0.5f, rows_[id].data());
        }
      }
    }
  }

  RowLookup Lookup() {
    return [this](absl::Span<const uint64_t> ids, float* out) {
      for (size_t i = 0; i < ids.size(); ++i) {
        std::copy(rows_[ids[i]].begin(), rows_[ids[i]].end(), out + i * model_->config().dim);
      }
      return absl::OkStatus();
    };
  }

  // The summed loss of the batch.
  double Loss() {
    CtrActivations acts;
    EXPECT_TRUE(model_->Forward(batch_, Lookup(), &acts).ok());
    return SigmoidCrossEntropy(acts.logits, labels_, nullptr) * batch_.size();
  }

  // The analytic gradient of Loss().
  CtrGradients Gradients() {
    CtrActivations acts;
    EXPECT_TRUE(model_->Forward(batch_, Lookup(), &acts).ok());
    std::vector<float> dlogits;
    SigmoidCrossEntropy(acts.logits, labels_, &dlogits);
    for (float& d : dlogits) d *= batch_.size();
    CtrGradients grads;
    model_->Backward(acts, dlogits, &grads);
    return grads;
  }

  // The central difference (Loss(x + h) - Loss(x - h)) / 2h in *x.
  double Numerical(float* x) {
    const float saved = *x;
    *x = saved + kStep;
    const double up = Loss();
    *x = saved - kStep;
    const double down = Loss();
    *x = saved;
    return (up - down) / (2.0 * kStep);
  }

  // Step and tolerance. The loss is summed in double from float logits of
  // magnitude about 1, each off by a few float roundings (~1e-6 absolute for
  // the whole batch at worst), so the difference quotient carries up to
  // 1e-6 / 2h = 5e-4 of rounding error; its truncation error h^2 / 6 |L'''|
  // is ~1e-7. The step must also stay small enough not to move a hidden
  // unit across its ReLU kink (5e-3 did, on a weight of a dense input of
  // about 4). The gradients are of order 0.1 to 1; the tolerance
  // 2e-3 + 1e-2 |g| is several times the expected error (the largest seen
  // is printed), and a wrong factor, sign or index is far beyond it.
  static constexpr float kStep = 1e-3f;
  static double Tolerance(double g) { return 2e-3 + 1e-2 * std::abs(g); }

  std::unique_ptr<CtrModel> model_;
  std::vector<CtrExample> batch_;
  std::vector<float> labels_;
  std::map<uint64_t, std::vector<float>> rows_;
};

TEST(CtrModel, SpecNamesEveryDenseTensor) {
  CtrModelConfig config;  // dim 16, hidden {64, 32}
  auto model = CtrModel::Create(config).value();
  ASSERT_EQ(model.spec().size(), 6u);
  EXPECT_EQ(model.spec()[0].name, "layer0/weight");
  EXPECT_EQ(model.spec()[0].shape, (std::vector<int64_t>{13 + 26 * 16, 64}));
  EXPECT_EQ(model.spec()[5].name, "layer2/bias");
  EXPECT_EQ(model.spec()[5].shape, (std::vector<int64_t>{1}));
  for (size_t t = 0; t < model.spec().size(); ++t) {
    EXPECT_EQ(static_cast<int64_t>(model.params()[t].size()), model.spec()[t].num_elements());
  }
  EXPECT_TRUE(ValidateModelSpec(model.spec()).ok());
}

TEST(CtrModel, RejectsBadConfig) {
  CtrModelConfig config;
  config.dim = 0;
  EXPECT_EQ(CtrModel::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
  config.dim = 4;
  config.hidden = {8, 0};
  EXPECT_EQ(CtrModel::Create(config).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(CtrModel, DenseGradientsMatchFiniteDifferences) {
  TinyProblem p;
  const CtrGradients grads = p.Gradients();
  double largest = 0, worst = 0;
  int checked = 0;
  for (size_t t = 0; t < p.model_->params().size(); ++t) {
    std::vector<float>& tensor = (*p.model_->mutable_params())[t];
    for (size_t i = 0; i < tensor.size(); ++i) {
      const double analytic = grads.dense[t][i];
      const double numerical = p.Numerical(&tensor[i]);
      ASSERT_NEAR(analytic, numerical, TinyProblem::Tolerance(analytic))
          << p.model_->spec()[t].name << "[" << i << "]";
      largest = std::max(largest, std::abs(analytic));
      worst = std::max(worst, std::abs(analytic - numerical));
      ++checked;
    }
  }
  std::printf("%d dense gradients, largest %.3g, largest error %.3g\n", checked, largest,
              worst);
  EXPECT_GT(checked, 400);
  EXPECT_GT(largest, 0.1);  // the check compared gradients, not zeros
}

TEST(CtrModel, EmbeddingGradientsMatchFiniteDifferences) {
  TinyProblem p;
  const CtrGradients grads = p.Gradients();
  ASSERT_EQ(grads.rows.size(), grads.ids.size() * 3);
  double largest = 0;
  for (size_t r = 0; r < grads.ids.size(); ++r) {
    std::vector<float>& row = p.rows_[grads.ids[r]];
    for (int j = 0; j < 3; ++j) {
      const double analytic = grads.rows[r * 3 + j];
      const double numerical = p.Numerical(&row[j]);
      ASSERT_NEAR(analytic, numerical, TinyProblem::Tolerance(analytic))
          << "id " << grads.ids[r] << " element " << j;
      largest = std::max(largest, std::abs(analytic));
    }
  }
  EXPECT_GT(largest, 0.01);
}

TEST(CtrModel, RepeatedIdsGetSummedGradients) {
  TinyProblem p;
  const CtrGradients grads = p.Gradients();
  // 4 examples with 3 ids a feature: some ids repeat, and each appears once.
  const std::set<uint64_t> unique(grads.ids.begin(), grads.ids.end());
  EXPECT_EQ(unique.size(), grads.ids.size());
  EXPECT_LT(grads.ids.size(), 4u * kCtrCategorical);
  EXPECT_EQ(unique, [&] {
    std::set<uint64_t> all;
    for (const CtrExample& e : p.batch_) all.insert(e.ids, e.ids + kCtrCategorical);
    return all;
  }());

  // The row gradient of the batch is the sum of each example's own.
  std::map<uint64_t, std::vector<double>> summed;
  for (size_t b = 0; b < p.batch_.size(); ++b) {
    CtrActivations acts;
    ASSERT_TRUE(p.model_->Forward({&p.batch_[b], 1}, p.Lookup(), &acts).ok());
    std::vector<float> dlogits;
    SigmoidCrossEntropy(acts.logits, {&p.labels_[b], 1}, &dlogits);
    CtrGradients one;
    p.model_->Backward(acts, dlogits, &one);
    for (size_t r = 0; r < one.ids.size(); ++r) {
      std::vector<double>& s = summed[one.ids[r]];
      s.resize(3);
      for (int j = 0; j < 3; ++j) s[j] += one.rows[r * 3 + j];
    }
  }
  int repeated = 0;
  for (size_t r = 0; r < grads.ids.size(); ++r) {
    int count = 0;
    for (const CtrExample& e : p.batch_) count += std::count(e.ids, e.ids + kCtrCategorical, grads.ids[r]);
    repeated += count > 1;
    for (int j = 0; j < 3; ++j) {
      EXPECT_NEAR(grads.rows[r * 3 + j], summed[grads.ids[r]][j], 1e-5);
    }
  }
  EXPECT_GT(repeated, 10);
}

TEST(CtrModel, SigmoidCrossEntropyIsStableAndMatchesDefinition) {
  std::vector<float> dlogits;
  const double loss = SigmoidCrossEntropy({0.0f, 2.0f, -100.0f}, {1.0f, 0.0f, 0.0f}, &dlogits);
  const double expected = (std::log(2.0) + std::log1p(std::exp(2.0)) + std::log1p(std::exp(-100.0))) / 3;
  EXPECT_NEAR(loss, expected, 1e-12);
  EXPECT_NEAR(dlogits[0], (0.5 - 1) / 3, 1e-7);
  EXPECT_NEAR(dlogits[1], 1 / (1 + std::exp(-2.0)) / 3, 1e-7);
  EXPECT_NEAR(dlogits[2], 0, 1e-7);
  EXPECT_TRUE(std::isfinite(SigmoidCrossEntropy({1000.0f}, {0.0f}, nullptr)));
}

}  // namespace
}  // namespace ps
