// CtrTrainer through a LocalParamStore (the standalone run): it learns the
// synthetic data far beyond the trivial predictors. (Through the servers:
// tests/ctr_remote_test.cc.)
#include "worker/ctr/trainer.h"

#include <cmath>
#include <cstdint>
#include <cstdio>
#include <vector>

#include "gtest/gtest.h"
#include "worker/ctr/auc.h"
#include "worker/ctr/data.h"
#include "worker/train/param_store.h"

namespace ps {
namespace {

TEST(CtrTrainer, StandaloneLearnsFarBeyondTrivialBaselines) {
  CtrGeneratorOptions data;
  data.vocab_sizes = {10000};
  data.num_examples = 200000;  // signal_vocab_size: the default
  auto generator = CtrGenerator::Create(data).value();
  LocalParamStore store(CtrStandaloneStore());
  auto trainer = CtrTrainer::Create(CtrTrainerOptions(), &store).value();

  constexpr int kHeldOut = 20000;
  std::vector<CtrExample> held_out(kHeldOut);
  std::vector<float> labels(kHeldOut);
  std::vector<double> best(kHeldOut);
  double positives = 0;
  for (int j = 0; j < kHeldOut; ++j) {
    held_out[j] = generator->HeldOutExample(j);
    labels[j] = held_out[j].label;
    best[j] = generator->BestProbability(held_out[j]);
    positives += labels[j];
  }
  const double rate = positives / kHeldOut;
  const double constant_loss = -(rate * std::log(rate) + (1 - rate) * std::log(1 - rate));
  const double best_auc = Auc(best, labels).value();

  constexpr int kBatch = 256;
  std::vector<CtrExample> batch(kBatch);
  double first_loss = 0;
  for (int64_t start = 0; start + kBatch <= data.num_examples; start += kBatch) {
    for (int i = 0; i < kBatch; ++i) batch[i] = generator->Example(start + i);
    const double loss = trainer->Step(batch).value();
    if (start == 0) first_loss = loss;
  }
  EXPECT_TRUE(std::isfinite(first_loss));
  std::vector<float> probs;
  ASSERT_TRUE(trainer->Predict(held_out, &probs).ok());
  const double auc = Auc(probs, labels).value();
  const double log_loss = LogLoss(probs, labels).value();
  std::printf("held-out AUC %.4f (best %.4f), log loss %.4f (constant %.4f), %zu rows\n", auc,
              best_auc, log_loss, constant_loss, store.rows(kCtrTableName));
  // Trivial baselines: AUC 0.5 and the constant predictor's log loss.
  EXPECT_GT(auc, 0.70);
  EXPECT_LT(log_loss, constant_loss - 0.03);
  EXPECT_LT(auc, best_auc + 0.01);  // the held-out set's ceiling, with noise
}

}  // namespace
}  // namespace ps
