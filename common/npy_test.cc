#include "common/npy.h"

#include <cstdio>
#include <fstream>
#include <sstream>

#include "gtest/gtest.h"

namespace ps {
namespace {

std::string TempPath(const char* name) {
  const char* dir = std::getenv("TEST_TMPDIR");
  return std::string(dir ? dir : "/tmp") + "/" + name;
}

TEST(Npy, RoundTripsShapeAndValues) {
  const std::string path = TempPath("a.npy");
  std::vector<float> v = {1.5f, -2.0f, 3.25f, 0.0f, 1e-7f, -1e30f};
  ASSERT_TRUE(WriteNpy(path, {2, 3}, v).ok());
  auto a = ReadNpy(path);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->shape, (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(a->data, v);
}

TEST(Npy, HeaderIsNumpyFormat1AlignedTo64Bytes) {
  const std::string path = TempPath("b.npy");
  ASSERT_TRUE(WriteNpy(path, {4}, {1, 2, 3, 4}).ok());
  std::ifstream f(path, std::ios::binary);
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  ASSERT_GE(s.size(), 10u);
  EXPECT_EQ(s.substr(0, 6), "\x93NUMPY");
  const size_t hlen = static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8);
  EXPECT_EQ((10 + hlen) % 64, 0u);
  EXPECT_NE(s.find("'shape': (4,)"), std::string::npos);
  EXPECT_EQ(s.size(), 10 + hlen + 16);
}

TEST(Npy, RejectsShapeDataMismatch) {
  EXPECT_FALSE(WriteNpy(TempPath("c.npy"), {2, 2}, {1, 2, 3}).ok());
}

}  // namespace
}  // namespace ps
