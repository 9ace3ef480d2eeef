#include "worker/mlp/dataset.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(Dataset, MissingFilesNameTheDebianPackage) {
  auto d = LoadFashionMnist("/nonexistent/fashion");
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("dataset-fashion-mnist"));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("train-images-idx3-ubyte"));
}

TEST(Dataset, LoadsDebianFashionMnist) {
  auto d = LoadFashionMnist(kDefaultDatasetDir);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->train.size, 60000);
  EXPECT_EQ(d->test.size, 10000);
  EXPECT_EQ(d->train.features, 784);
  std::vector<int> counts(10, 0);
  for (float l : d->test.labels) ++counts[int(l)];
  for (int c : counts) EXPECT_EQ(c, 1000);  // Fashion-MNIST's test set is balanced
}

TEST(Dataset, RejectsFilesThatAreNotIdx) {
  const std::string path = std::string(getenv("TEST_TMPDIR")) + "/junk";
  FILE* f = fopen(path.c_str(), "w");
  fputs("not an idx file at all", f);
  fclose(f);
  EXPECT_EQ(LoadIdxPair(path, path).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps
