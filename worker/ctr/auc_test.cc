#include "worker/ctr/auc.h"

#include <cmath>
#include <cstdint>

#include "gtest/gtest.h"

namespace ps {
namespace {

// The definition, O(n^2): the share of (positive, negative) pairs the
// positive wins, ties counting one half.
double PairwiseAuc(const std::vector<float>& s, const std::vector<float>& y) {
  double wins = 0, pairs = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    for (size_t j = 0; j < s.size(); ++j) {
      if (y[i] != 1 || y[j] != 0) continue;
      pairs += 1;
      wins += s[i] > s[j] ? 1.0 : s[i] == s[j] ? 0.5 : 0.0;
    }
  }
  return wins / pairs;
}

TEST(Auc, HandComputedCases) {
  // Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs won.
  EXPECT_DOUBLE_EQ(*Auc(std::vector<float>{0.1f, 0.4f, 0.35f, 0.8f}, {0, 0, 1, 1}), 0.75);
  EXPECT_DOUBLE_EQ(*Auc(std::vector<float>{1, 2, 3, 4}, {0, 0, 1, 1}), 1.0);
  EXPECT_DOUBLE_EQ(*Auc(std::vector<float>{1, 2, 3, 4}, {1, 1, 0, 0}), 0.0);
  EXPECT_DOUBLE_EQ(*Auc(std::vector<double>{0.9, 0.1}, {1, 0}), 1.0);
}

TEST(Auc, TiesCountOneHalf) {
  EXPECT_DOUBLE_EQ(*Auc(std::vector<float>{0.5f, 0.5f, 0.5f, 0.5f}, {0, 1, 0, 1}), 0.5);
  // Positive 0.5 beats negative 0.1 (1) and ties negative 0.5 (1/2);
  // positive 0.9 beats both (2): 3.5 of 4.
  EXPECT_DOUBLE_EQ(*Auc(std::vector<float>{0.1f, 0.5f, 0.5f, 0.9f}, {0, 0, 1, 1}), 0.875);
  // Three tied at 0.2 (one positive) below one positive at 0.7: positive
  // 0.2 ties two negatives (1), positive 0.7 beats them (2): 3 of 4.
  EXPECT_DOUBLE_EQ(*Auc(std::vector<float>{0.2f, 0.7f, 0.2f, 0.2f}, {0, 1, 1, 0}), 0.75);
}

TEST(Auc, MatchesThePairwiseDefinitionWithManyTies) {
  std::vector<float> s, y;
  uint64_t x = 12345;
  for (int i = 0; i < 500; ++i) {
    x = x * 6364136223846793005ULL + 1442695040888963407ULL;
    s.push_back(static_cast<float>((x >> 33) % 17));  // 17 distinct scores
    y.push_back(((x >> 20) % 3 == 0) ? 1.0f : 0.0f);
  }
  EXPECT_NEAR(*Auc(s, y), PairwiseAuc(s, y), 1e-12);
}

TEST(Auc, RejectsUndefinedInputs) {
  EXPECT_EQ(Auc(std::vector<float>{1, 2}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Auc(std::vector<float>{1, 2}, {1, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Auc(std::vector<float>{}, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(Auc(std::vector<float>{NAN, 1}, {0, 1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(LogLoss, HandComputedCases) {
  // -(log 0.9 + log 0.8) / 2
  EXPECT_NEAR(*LogLoss(std::vector<float>{0.9f, 0.2f}, {1, 0}),
              (0.10536051565782628 + 0.22314355131420976) / 2, 1e-7);
  EXPECT_NEAR(*LogLoss(std::vector<double>{0.5, 0.5, 0.5}, {1, 0, 1}), std::log(2.0), 1e-15);
  EXPECT_NEAR(*LogLoss(std::vector<double>{0.25}, {1}), std::log(4.0), 1e-15);
}

TEST(LogLoss, ClampsCertainMistakes) {
  // p = 0 for a positive costs -log(1e-7) = 16.118..., not infinity.
  EXPECT_NEAR(*LogLoss(std::vector<double>{0.0}, {1}), -std::log(1e-7), 1e-9);
  EXPECT_NEAR(*LogLoss(std::vector<double>{1.0}, {0}), -std::log(1e-7), 1e-6);
  EXPECT_NEAR(*LogLoss(std::vector<double>{0.0}, {1}, 1e-3), -std::log(1e-3), 1e-12);
  // A correct certain prediction costs about epsilon.
  EXPECT_LT(*LogLoss(std::vector<double>{1.0, 0.0}, {1, 0}), 2e-7);
}

TEST(LogLoss, RejectsBadInputs) {
  EXPECT_EQ(LogLoss(std::vector<float>{0.5f}, {1, 0}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogLoss(std::vector<float>{}, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogLoss(std::vector<float>{0.5f}, {2}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(LogLoss(std::vector<double>{NAN}, {1}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
