#include "worker/ctr/data.h"

#include <cmath>
#include <cstdio>
#include <cstring>
#include <set>

#include "gtest/gtest.h"
#include "worker/ctr/auc.h"
#include "worker/ctr/det_math.h"

namespace ps {
namespace {

std::unique_ptr<CtrGenerator> MakeGenerator(const CtrGeneratorOptions& options) {
  auto g = CtrGenerator::Create(options);
  EXPECT_TRUE(g.ok()) << g.status();
  return std::move(g).value();
}

bool SameExample(const CtrExample& a, const CtrExample& b) {
  return std::memcmp(a.dense, b.dense, sizeof(a.dense)) == 0 &&
         std::memcmp(a.ids, b.ids, sizeof(a.ids)) == 0 && a.label == b.label;
}

// A hash of every bit of examples [0, n).
uint64_t Fingerprint(const CtrGenerator& g, int n) {
  uint64_t h = 0;
  for (int i = 0; i < n; ++i) {
    const CtrExample e = g.Example(i);
    for (float d : e.dense) {
      uint32_t bits;
      std::memcpy(&bits, &d, 4);
      h = SplitMix64(h ^ bits);
    }
    for (uint64_t id : e.ids) h = SplitMix64(h ^ id);
    h = SplitMix64(h ^ static_cast<uint64_t>(e.label));
  }
  return h;
}

TEST(CtrGenerator, SameSeedSameExamples) {
  auto a = MakeGenerator({});
  auto b = MakeGenerator({});
  EXPECT_EQ(a->bias(), b->bias());
  for (int64_t i : {0, 1, 17, 999999, 123456789}) {
    EXPECT_TRUE(SameExample(a->Example(i), b->Example(i))) << i;
  }
  // Independent of the order examples are asked for.
  const CtrExample late = a->Example(5000);
  for (int i = 0; i < 100; ++i) a->Example(i);
  EXPECT_TRUE(SameExample(late, a->Example(5000)));
}

TEST(CtrGenerator, DifferentIndexOrSeedDifferentExamples) {
  auto a = MakeGenerator({});
  CtrGeneratorOptions other;
  other.seed = 2;
  auto b = MakeGenerator(other);
  int same_dense = 0;
  for (int i = 0; i < 1000; ++i) {
    EXPECT_FALSE(SameExample(a->Example(i), a->Example(i + 1))) << i;
    EXPECT_FALSE(SameExample(a->Example(i), b->Example(i))) << i;
    same_dense += std::memcmp(a->Example(i).dense, a->Example(i + 1).dense,
                              sizeof(CtrExample::dense)) == 0;
  }
  EXPECT_LT(same_dense, 5);
  EXPECT_TRUE(SameExample(a->HeldOutExample(3), a->Example(a->options().num_examples + 3)));
}

// The bits of the default generator's first examples, pinned: the generator
// uses no libm function that could round differently on another machine, so
// these hold on any x86-64. A change here changes everyone's data.
TEST(CtrGenerator, DefaultExamplesArePinned) {
  auto g = MakeGenerator({});
  const CtrExample e = g->Example(0);
  std::printf("bias %.17g  example 0 ids[0..2] %llu %llu %llu  fingerprint(1000) %llu\n",
              g->bias(), (unsigned long long)CtrIdRaw(e.ids[0]),
              (unsigned long long)CtrIdRaw(e.ids[1]), (unsigned long long)CtrIdRaw(e.ids[2]),
              (unsigned long long)Fingerprint(*g, 1000));
  EXPECT_EQ(Fingerprint(*g, 1000), uint64_t{15633255018866174192ULL});
}

TEST(CtrGenerator, IdsCarryTheirFeatureAndStayInTheVocabulary) {
  CtrGeneratorOptions options;
  options.vocab_sizes.clear();
  for (int f = 0; f < kCtrCategorical; ++f) options.vocab_sizes.push_back(1 + 3 * f);
  auto g = MakeGenerator(options);
  std::vector<std::set<uint64_t>> seen(kCtrCategorical);
  for (int i = 0; i < 20000; ++i) {
    const CtrExample e = g->Example(i);
    for (int f = 0; f < kCtrCategorical; ++f) {
      ASSERT_EQ(CtrIdFeature(e.ids[f]), f);
      ASSERT_LT(CtrIdRaw(e.ids[f]), options.vocab_sizes[f]) << "feature " << f;
      seen[f].insert(CtrIdRaw(e.ids[f]));
    }
    for (float d : e.dense) ASSERT_TRUE(d >= 0 && d < 12) << d;
  }
  // 20,000 draws reach every id of these small vocabularies: the rarest of
  // 76 ids under Zipf(1.05) has probability 1/423, so about 47 draws.
  for (int f = 0; f < kCtrCategorical; ++f) EXPECT_EQ(seen[f].size(), options.vocab_sizes[f]);
}

// The share of rank k in N draws is within 5 standard deviations
// (sqrt(p (1 - p) / N)) of p_k = k^-s / H(n, s): a correct sampler fails
// this with probability below 1e-6 per check, and the draws are fixed, so
// the test is deterministic.
void ExpectZipfShares(uint64_t n, double s, const std::vector<uint64_t>& ranks) {
  double harmonic = 0;
  for (uint64_t k = 1; k <= n; ++k) harmonic += std::pow(static_cast<double>(k), -s);
  ZipfSampler zipf(n, s);
  const int kDraws = 200000;
  std::vector<int> counts(ranks.size(), 0);
  for (int i = 0; i < kDraws; ++i) {
    const uint64_t k = zipf.Sample([&](int a) { return UnitFromBits(Hash4(7, 0, i, a)); });
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, n);
    for (size_t r = 0; r < ranks.size(); ++r) counts[r] += k == ranks[r];
  }
  for (size_t r = 0; r < ranks.size(); ++r) {
    const double p = std::pow(static_cast<double>(ranks[r]), -s) / harmonic;
    const double share = static_cast<double>(counts[r]) / kDraws;
    EXPECT_NEAR(share, p, 5 * std::sqrt(p * (1 - p) / kDraws))
        << "n=" << n << " s=" << s << " rank " << ranks[r];
  }
}

TEST(ZipfSampler, HeadSharesMatchTheory) {
  ExpectZipfShares(1000000, 1.05, {1, 2, 3, 10, 100});
  ExpectZipfShares(10, 1.05, {1, 2, 3, 4, 5, 6, 7, 8, 9, 10});
  ExpectZipfShares(1000, 1.0, {1, 2, 10});
  ExpectZipfShares(100000, 0.5, {1, 2, 1000});
  ExpectZipfShares(1000, 2.0, {1, 2, 3});
  ExpectZipfShares(1, 1.05, {1});
}

TEST(ZipfSampler, HandlesVocabulariesUpTo52Bits) {
  ZipfSampler zipf(kRawIdMask, 1.05);
  for (int i = 0; i < 1000; ++i) {
    const uint64_t k = zipf.Sample([&](int a) { return UnitFromBits(Hash4(3, 0, i, a)); });
    ASSERT_GE(k, 1u);
    ASSERT_LE(k, kRawIdMask);
  }
}

TEST(CtrGenerator, PositiveRateNearTarget) {
  for (double target : {0.25, 0.05}) {
    CtrGeneratorOptions options;
    options.positive_rate = target;
    auto g = MakeGenerator(options);
    const int n = 100000;
    double positives = 0, mean_p = 0;
    for (int i = 0; i < n; ++i) {
      const CtrExample e = g->HeldOutExample(i);
      positives += e.label;
      mean_p += g->BestProbability(e);
    }
    // The bias is fitted on 20,000 other examples; the label noise on 100,000
    // adds a standard deviation of sqrt(0.25 * 0.75 / 1e5) = 0.0014.
    EXPECT_NEAR(positives / n, target, 0.01) << "target " << target;
    EXPECT_NEAR(mean_p / n, target, 0.01) << "target " << target;
  }
}

TEST(CtrGenerator, BestAucOnHeldOutExamples) {
  auto g = MakeGenerator({});
  const int n = 100000;
  std::vector<double> p(n);
  std::vector<float> labels(n);
  for (int j = 0; j < n; ++j) {
    const CtrExample e = g->HeldOutExample(j);
    p[j] = g->BestProbability(e);
    labels[j] = e.label;
  }
  auto auc = Auc(p, labels);
  auto loss = LogLoss(p, labels);
  ASSERT_TRUE(auc.ok() && loss.ok());
  std::printf("default generator, 100000 held-out examples: best AUC %.4f, log loss %.4f\n",
              *auc, *loss);
  EXPECT_GT(*auc, 0.75);
  EXPECT_LT(*auc, 0.9);
  // Scores unrelated to the hidden model do no better than chance.
  std::vector<double> random_scores(n);
  for (int j = 0; j < n; ++j) random_scores[j] = UnitFromBits(Hash4(99, 0, j, 0));
  EXPECT_NEAR(*Auc(random_scores, labels), 0.5, 0.01);
}

TEST(CtrGenerator, SignalVocabSizeLeavesRareIdsWithoutWeight) {
  CtrGeneratorOptions options;
  options.signal_vocab_size = 100;
  auto capped = MakeGenerator(options);
  options.signal_vocab_size = 0;
  auto full = MakeGenerator(options);
  // Same features either way; only the hidden model differs.
  CtrExample e = capped->Example(42);
  EXPECT_EQ(std::memcmp(e.ids, full->Example(42).ids, sizeof(e.ids)), 0);
  for (int f = 0; f < kCtrCategorical; ++f) e.ids[f] = CtrFeatureId(f, 500);
  const double rare = capped->Logit(e);
  for (int f = 0; f < kCtrCategorical; ++f) e.ids[f] = CtrFeatureId(f, 123456);
  EXPECT_EQ(capped->Logit(e), rare);     // no weight on either
  EXPECT_NE(full->Logit(e) - full->bias(), rare - capped->bias());
  for (int f = 0; f < kCtrCategorical; ++f) e.ids[f] = CtrFeatureId(f, 7);
  EXPECT_NE(capped->Logit(e), rare);     // id 7 has one
}

TEST(CtrGeneratorOptions, RejectsBadValuesNamingTheField) {
  auto bad = [](auto change) {
    CtrGeneratorOptions o;
    change(o);
    return std::string(o.Validate().message());
  };
  EXPECT_TRUE(CtrGeneratorOptions().Validate().ok());
  EXPECT_NE(bad([](auto& o) { o.vocab_sizes = {1, 2}; }).find("vocab_sizes"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.vocab_sizes = {0}; }).find("vocab_sizes"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.vocab_sizes = {kRawIdMask + 1}; }).find("vocab_sizes"),
            std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.zipf_exponent = 0; }).find("zipf_exponent"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.positive_rate = 1; }).find("positive_rate"), std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.dense_weight_scale = -1; }).find("dense_weight_scale"),
            std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.categorical_weight_scale = NAN; })
                .find("categorical_weight_scale"),
            std::string::npos);
  EXPECT_NE(bad([](auto& o) { o.num_examples = -1; }).find("num_examples"), std::string::npos);
  CtrGeneratorOptions o;
  o.zipf_exponent = -2;
  EXPECT_EQ(CtrGenerator::Create(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
