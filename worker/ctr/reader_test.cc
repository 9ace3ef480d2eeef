#include "worker/ctr/reader.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

std::string WriteFile(const std::string& name, const std::string& text) {
  const std::string path = std::string(std::getenv("TEST_TMPDIR")) + "/" + name;
  FILE* f = std::fopen(path.c_str(), "w");
  EXPECT_NE(f, nullptr) << path;
  std::fputs(text.c_str(), f);
  std::fclose(f);
  return path;
}

// A Criteo line: label, 13 integers, 26 tokens, any of them empty.
std::string CriteoLine(const std::string& label, const std::vector<std::string>& dense,
                       const std::vector<std::string>& cats) {
  std::string line = label;
  for (int j = 0; j < kCtrDense; ++j) line += "\t" + (j < (int)dense.size() ? dense[j] : "");
  for (int f = 0; f < kCtrCategorical; ++f) line += "\t" + (f < (int)cats.size() ? cats[f] : "");
  return line + "\n";
}

TEST(CtrReader, ReadsCriteoTsv) {
  const std::string path = WriteFile(
      "criteo.tsv", CriteoLine("1", {"0", "3", "", "-2"}, {"68fd1e64", "", "68fd1e64"}) +
                        "\n" +  // a blank line is skipped
                        CriteoLine("0", {}, {}));
  auto examples = ReadCtrFile(path, {});
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 2u);
  const CtrExample& a = (*examples)[0];
  EXPECT_EQ(a.label, 1.0f);
  EXPECT_EQ(a.dense[0], 0.0f);
  EXPECT_FLOAT_EQ(a.dense[1], std::log(4.0f));   // log(1 + 3)
  EXPECT_EQ(a.dense[2], 0.0f);                    // empty
  EXPECT_FLOAT_EQ(a.dense[3], -std::log(3.0f));  // -log(1 + 2)
  EXPECT_EQ(a.ids[0], CtrFeatureId(0, CtrTokenRawId("68fd1e64")));
  EXPECT_EQ(a.ids[1], CtrFeatureId(1, kMissingRawId));
  // The same token in two features: two different ids.
  EXPECT_EQ(CtrIdRaw(a.ids[2]), CtrIdRaw(a.ids[0]));
  EXPECT_NE(a.ids[2], a.ids[0]);
  const CtrExample& b = (*examples)[1];
  EXPECT_EQ(b.label, 0.0f);
  for (int f = 0; f < kCtrCategorical; ++f) {
    EXPECT_EQ(b.ids[f], CtrFeatureId(f, kMissingRawId));
  }
  EXPECT_NE(CtrTokenRawId("68fd1e64"), CtrTokenRawId("68fd1e65"));
  EXPECT_LT(CtrTokenRawId("x"), kMissingRawId);
}

TEST(CtrReader, CriteoAcceptsCrlfAndStopsAtMaxExamples) {
  std::string text;
  for (int i = 0; i < 5; ++i) {
    std::string line = CriteoLine("1", {"7"}, {"a"});
    line.insert(line.size() - 1, "\r");
    text += line;
  }
  const std::string path = WriteFile("crlf.tsv", text);
  CtrReaderOptions options;
  options.max_examples = 3;
  auto examples = ReadCtrFile(path, options);
  ASSERT_TRUE(examples.ok()) << examples.status();
  EXPECT_EQ(examples->size(), 3u);
  EXPECT_EQ((*examples)[2].ids[25], CtrFeatureId(25, kMissingRawId));
}

TEST(CtrReader, MalformedCriteoLinesNameFileAndLine) {
  struct Case {
    std::string line;
    std::string message;
  };
  const std::vector<Case> cases = {
      {"1\t2\t3\n", "expected 40 tab-separated fields"},
      {CriteoLine("2", {}, {}), "label: expected 0 or 1"},
      {CriteoLine("", {}, {}), "label: expected 0 or 1"},
      {CriteoLine("1", {"1", "x7"}, {}), "integer field 2"},
      {CriteoLine("1", {"1.5"}, {}), "integer field 1"},
      {CriteoLine("1", {}, {}).insert(40, "\t"), "expected 40"},  // 41 fields
  };
  for (const Case& c : cases) {
    const std::string path = WriteFile("bad.tsv", CriteoLine("0", {}, {}) + c.line);
    auto examples = ReadCtrFile(path, {});
    EXPECT_EQ(examples.status().code(), absl::StatusCode::kInvalidArgument) << c.line;
    EXPECT_THAT(std::string(examples.status().message()), HasSubstr(path + ":2: ")) << c.line;
    EXPECT_THAT(std::string(examples.status().message()), HasSubstr(c.message)) << c.line;
  }
}

TEST(CtrReader, ReadsLibsvm) {
  const std::string path = WriteFile("data.svm",
                                     "+1 0:1.5 5:2 100:1 7:1 250:1  # a comment\n"
                                     "-1 300:1\t301:0 302:1\n"
                                     "0\n");
  CtrReaderOptions options;
  options.format = CtrFormat::kLibsvm;
  options.libsvm_dense_base = 0;  // indices 0..12 are dense
  auto examples = ReadCtrFile(path, options);
  ASSERT_TRUE(examples.ok()) << examples.status();
  ASSERT_EQ(examples->size(), 3u);
  const CtrExample& a = (*examples)[0];
  EXPECT_EQ(a.label, 1.0f);
  EXPECT_EQ(a.dense[0], 1.5f);
  EXPECT_EQ(a.dense[5], 2.0f);
  EXPECT_EQ(a.dense[7], 1.0f);
  EXPECT_EQ(a.ids[0], CtrFeatureId(0, 100));  // first categorical pair
  EXPECT_EQ(a.ids[1], CtrFeatureId(1, 250));
  EXPECT_EQ(a.ids[2], CtrFeatureId(2, kMissingRawId));
  const CtrExample& b = (*examples)[1];
  EXPECT_EQ(b.label, 0.0f);
  EXPECT_EQ(b.ids[0], CtrFeatureId(0, 300));
  EXPECT_EQ(b.ids[1], CtrFeatureId(1, 302));  // 301:0 is absent
  EXPECT_EQ((*examples)[2].ids[0], CtrFeatureId(0, kMissingRawId));
}

TEST(CtrReader, LibsvmWithoutDenseFoldsExtraPairsIntoCrosses) {
  // 39 one-hot pairs, as in LIBSVM's "criteo" files: pairs 26..38 cross
  // with features 0..12.
  std::string line = "1";
  for (int k = 0; k < 39; ++k) line += " " + std::to_string(1000 + k) + ":1";
  CtrExample e;
  ASSERT_TRUE(ParseLibsvmLine(line, -1, &e).ok());
  EXPECT_EQ(e.ids[13], CtrFeatureId(13, 1013));
  EXPECT_EQ(e.ids[25], CtrFeatureId(25, 1025));
  EXPECT_EQ(CtrIdFeature(e.ids[0]), 0);
  EXPECT_NE(CtrIdRaw(e.ids[0]), 1000u);
  EXPECT_NE(CtrIdRaw(e.ids[0]), kMissingRawId);
  CtrExample again;
  ASSERT_TRUE(ParseLibsvmLine(line, -1, &again).ok());
  EXPECT_EQ(again.ids[0], e.ids[0]);
  // Without dense_base, small indices are categorical too.
  ASSERT_TRUE(ParseLibsvmLine("0 3:1", -1, &e).ok());
  EXPECT_EQ(e.ids[0], CtrFeatureId(0, 3));
  EXPECT_EQ(e.dense[3], 0.0f);
}

TEST(CtrReader, MalformedLibsvmLinesNameFileAndLine) {
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"yes 1:1", "label: expected a number"},
      {"1 1-1", "pair 1: expected index:value"},
      {"1 2:1 a:1", "pair 2"},
      {"1 -3:1", "pair 1"},
      {"1 3:abc", "pair 1"},
      {"1 3:inf", "pair 1"},
      {"1 4503599627370495:1", "not below 2^52 - 1"},
      {"1 qid:3 2:1", "pair 1"},
  };
  CtrReaderOptions options;
  options.format = CtrFormat::kLibsvm;
  for (const auto& [line, message] : cases) {
    const std::string path = WriteFile("bad.svm", "1 5:1\n\n" + line + "\n");
    auto examples = ReadCtrFile(path, options);
    EXPECT_EQ(examples.status().code(), absl::StatusCode::kInvalidArgument) << line;
    EXPECT_THAT(std::string(examples.status().message()), HasSubstr(path + ":3: ")) << line;
    EXPECT_THAT(std::string(examples.status().message()), HasSubstr(message)) << line;
  }
}

TEST(CtrReader, MissingFileIsNotFound) {
  auto examples = ReadCtrFile("/nonexistent/criteo.tsv", {});
  EXPECT_EQ(examples.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(examples.status().message()), HasSubstr("/nonexistent/criteo.tsv"));
}

TEST(CtrReader, CallbackErrorsStopTheRead) {
  const std::string path =
      WriteFile("three.tsv", CriteoLine("0", {}, {}) + CriteoLine("1", {}, {}) +
                                 CriteoLine("0", {}, {}));
  int seen = 0;
  absl::Status s = ForEachCtrExample(path, {}, [&](const CtrExample&) {
    return ++seen == 2 ? absl::CancelledError("enough") : absl::OkStatus();
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kCancelled);
  EXPECT_EQ(seen, 2);
}

}  // namespace
}  // namespace ps
