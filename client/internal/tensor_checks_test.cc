#include "client/internal/tensor_checks.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

const ModelSpec kSpec = {{"w", {2, 3}}, {"b", {3}}};

TEST(CheckTensors, AcceptsOneTensorOfEachSize) {
  EXPECT_TRUE(CheckTensors(kSpec, TensorList{std::vector<float>(6), std::vector<float>(3)}).ok());
}

TEST(CheckTensors, BeforeInit) {
  const absl::Status s = CheckTensors({}, TensorList{});
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(s.message(), "Init must be called first");
}

TEST(CheckTensors, WrongCount) {
  const absl::Status s = CheckTensors(kSpec, TensorList{std::vector<float>(6)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "got 1 tensors, the model has 2");
}

TEST(CheckTensors, WrongSizeNamesTheTensor) {
  const absl::Status s = CheckTensors(kSpec, TensorList{std::vector<float>(6), std::vector<float>(4)});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr("got 4 values"));
  EXPECT_THAT(s.message(), HasSubstr(TensorSpecToString(kSpec[1])));
  EXPECT_EQ(CheckTensor(kSpec[0], 5).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(CheckTensors, ViewsOfWrongSizeNameTheTensor) {
  std::vector<float> w(6), b(3), short_b(2);
  const absl::Status s = CheckTensors(kSpec, ConstTensorViews{w, short_b});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.message(), HasSubstr(TensorSpecToString(kSpec[1])));
  EXPECT_TRUE(CheckTensors(kSpec, ConstTensorViews{w, b}).ok());
  EXPECT_TRUE(CheckTensors(kSpec, TensorViews{absl::MakeSpan(w), absl::MakeSpan(b)}).ok());
  EXPECT_EQ(CheckTensors(kSpec, TensorViews{absl::MakeSpan(w)}).message(),
            "got 1 weight tensors, the model has 2");
}

TEST(ResizeToSpec, OneTensorOfEachSize) {
  TensorList t = {std::vector<float>(1), std::vector<float>(9), std::vector<float>(2)};
  ResizeToSpec(kSpec, &t);
  ASSERT_EQ(t.size(), 2u);
  EXPECT_EQ(t[0].size(), 6u);
  EXPECT_EQ(t[1].size(), 3u);
  EXPECT_TRUE(CheckTensors(kSpec, t).ok());
}

}  // namespace
}  // namespace ps
