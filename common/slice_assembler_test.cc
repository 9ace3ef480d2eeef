#include "common/slice_assembler.h"

#include <cmath>
#include <cstring>
#include <deque>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

// Shard 1 of 2 owns w[6, 12) and b[1, 3) of this spec.
const ModelSpec kSpec = {{"w", {3, 4}}, {"b", {3}}};

class Assembler : public ::testing::Test {
 protected:
  Assembler() : layout_(MakeSliceLayout(kSpec, 2, 1)), flat_(layout_->num_elements, -1.0f) {}

  SliceAssembler Make(bool reject_nonfinite = true) {
    SliceAssembler::Options o;
    o.what = "push";
    o.reject_nonfinite = reject_nonfinite;
    return SliceAssembler(layout_, o);
  }

  // A chunk whose data holds `values`.
  RawTensorSlice Chunk(const std::string& name, std::vector<int64_t> shape, int64_t offset,
                       int64_t length, std::vector<float> values) {
    bytes_.emplace_back(values.size() * sizeof(float), '\0');
    if (!values.empty()) std::memcpy(&bytes_.back()[0], values.data(), bytes_.back().size());
    return RawTensorSlice{name, std::move(shape), offset, length, {bytes_.back()}};
  }

  SliceAssembler::Destination Flat() {
    return [this](const SliceRange& r) -> absl::StatusOr<float*> {
      ++destinations_;
      return flat_.data() + r.flat_offset;
    };
  }

  std::shared_ptr<const SliceLayout> layout_;
  std::vector<float> flat_;
  std::deque<std::string> bytes_;
  int destinations_ = 0;
};

TEST_F(Assembler, WholeSlicesAndInOrderChunksAssemble) {
  SliceAssembler a = Make();
  ASSERT_TRUE(a.Add(Chunk("w", {3, 4}, 6, 2, {1, 2}), Flat()).ok());
  ASSERT_TRUE(a.Add(Chunk("b", {3}, 1, 2, {9, 10}), Flat()).ok());
  EXPECT_THAT(std::string(a.Finish().message()), HasSubstr("missing elements [8, 12) of tensor 'w'"));
  ASSERT_TRUE(a.Add(Chunk("w", {3, 4}, 8, 4, {3, 4, 5, 6}), Flat()).ok());
  EXPECT_TRUE(a.Finish().ok());
  EXPECT_EQ(flat_, (std::vector<float>{1, 2, 3, 4, 5, 6, 9, 10}));
}

TEST_F(Assembler, OverflowingRangesAreRejectedBeforeAnyCopy) {
  // The request that used to wedge a shard: (0,1), (1, 2^63-1), (wrapped, 0).
  SliceAssembler a = Make();
  ASSERT_TRUE(a.Add(Chunk("b", {3}, 1, 2, {1, 1}), Flat()).ok());
  bytes_.emplace_back(36, '\0');
  const RawTensorSlice huge{"w", {3, 4}, 6, kMax, {bytes_.back()}};
  const int before = destinations_;
  absl::Status s = a.Add(huge, Flat());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("tensor 'w'"));
  EXPECT_THAT(std::string(s.message()), HasSubstr("[6, 12)"));
  EXPECT_EQ(destinations_, before) << "no destination for a rejected chunk";
  for (int64_t offset : {kMax, std::numeric_limits<int64_t>::min(), int64_t{-1}, int64_t{6}}) {
    for (int64_t length : {kMax, std::numeric_limits<int64_t>::min(), int64_t{-1}, kMax - 5}) {
      EXPECT_EQ(a.Add(Chunk("w", {3, 4}, offset, length, {}), Flat()).code(),
                absl::StatusCode::kInvalidArgument)
          << offset << " " << length;
    }
  }
  // A length that fits the range but a data size of 4 * 2^62 would wrap.
  EXPECT_FALSE(a.Add(Chunk("w", {3, 4}, 6, int64_t{1} << 62, {}), Flat()).ok());
  EXPECT_EQ(destinations_, before);
}

TEST_F(Assembler, EveryMistakeIsInvalidArgumentNamingTheTensor) {
  struct Case {
    RawTensorSlice chunk;
    const char* says;
  } cases[] = {
      {Chunk("nope", {3, 4}, 6, 6, {0, 0, 0, 0, 0, 0}), "unknown tensor 'nope'"},
      {Chunk("w", {12}, 6, 6, {0, 0, 0, 0, 0, 0}), "has shape [12] but the model has w[3,4]"},
      {Chunk("w", {3, 4}, 0, 6, {0, 0, 0, 0, 0, 0}), "outside [6, 12)"},
      {Chunk("w", {3, 4}, 7, 5, {0, 0, 0, 0, 0}), "expected the next chunk to start at 6"},
      {Chunk("w", {3, 4}, 6, 7, {0, 0, 0, 0, 0, 0, 0}), "outside [6, 12)"},
      {Chunk("w", {3, 4}, 6, 6, {0, 0, 0, 0, 0}), "5 float32 elements, expected 6"},
  };
  for (const Case& c : cases) {
    SliceAssembler a = Make();
    absl::Status s = a.Add(c.chunk, Flat());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.says;
    EXPECT_THAT(std::string(s.message()), HasSubstr(c.says));
    EXPECT_THAT(std::string(s.message()), HasSubstr("push: "));
  }
  // Odd byte counts, and a range given twice.
  SliceAssembler a = Make();
  RawTensorSlice odd = Chunk("b", {3}, 1, 2, {1, 1});
  odd.data[0] = odd.data[0].substr(0, 3);
  EXPECT_THAT(std::string(a.Add(odd, Flat()).message()), HasSubstr("not a multiple of 4"));
  ASSERT_TRUE(a.Add(Chunk("b", {3}, 1, 2, {1, 1}), Flat()).ok());
  EXPECT_EQ(a.Add(Chunk("b", {3}, 1, 2, {1, 1}), Flat()).code(), absl::StatusCode::kInvalidArgument);
  // A tensor of the model whose range on this shard is empty: b on shard 0
  // of 4 (3 elements over 4 shards).
  SliceAssembler::Options o;
  SliceAssembler small(MakeSliceLayout(kSpec, 4, 0), o);
  EXPECT_THAT(std::string(small.Add(Chunk("b", {3}, 0, 0, {}), Flat()).message()),
              HasSubstr("tensor 'b' has no elements on this shard"));
}

TEST_F(Assembler, NamesFromTheNetworkAreQuotedEscapedAndShort) {
  // Invalid UTF-8 and a 1 MB name: the message must stay valid UTF-8 (it
  // travels in a proto3 string) and short (gRPC metadata limits).
  SliceAssembler a = Make();
  const std::string name = "\xc3(" + std::string(1 << 20, 'n');
  absl::Status s = a.Add(Chunk(name, {3}, 0, 1, {1}), Flat());
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("unknown tensor '\\xc3(nnn"));
  EXPECT_LT(s.message().size(), 200u);
  for (unsigned char ch : s.message()) EXPECT_LT(ch, 0x80);
}

TEST_F(Assembler, NonFiniteValuesAreRejectedWhenAsked) {
  for (float bad : {std::nanf(""), std::numeric_limits<float>::infinity(),
                    -std::numeric_limits<float>::infinity()}) {
    SliceAssembler a = Make(/*reject_nonfinite=*/true);
    absl::Status s = a.Add(Chunk("w", {3, 4}, 6, 6, {0, 1, 2, bad, 4, 5}), Flat());
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(s.message()), HasSubstr("NaN or Inf"));
    SliceAssembler lenient = Make(/*reject_nonfinite=*/false);
    EXPECT_TRUE(lenient.Add(Chunk("w", {3, 4}, 6, 6, {0, 1, 2, bad, 4, 5}), Flat()).ok());
  }
  // Large finite values (and the largest float) are fine.
  SliceAssembler a = Make();
  EXPECT_TRUE(a.Add(Chunk("w", {3, 4}, 6, 6, {std::numeric_limits<float>::max(), -1e30f, 0, 0, 0,
                                               std::numeric_limits<float>::denorm_min()}),
                    Flat())
                  .ok());
}

TEST_F(Assembler, ValidateChecksAWholeMessageWithoutCopying) {
  SliceAssembler a = Make();
  std::vector<RawTensorSlice> good = {Chunk("w", {3, 4}, 6, 3, {1, 2, 3}),
                                      Chunk("w", {3, 4}, 9, 3, {4, 5, 6}),
                                      Chunk("b", {3}, 1, 2, {7, 8})};
  EXPECT_TRUE(a.Validate(good).ok());
  EXPECT_EQ(destinations_, 0);
  std::vector<RawTensorSlice> short_message = {good[0], good[2]};
  EXPECT_THAT(std::string(a.Validate(short_message).message()), HasSubstr("missing elements"));
  // Validate left the assembler untouched.
  for (const RawTensorSlice& c : good) ASSERT_TRUE(a.Add(c, Flat()).ok());
  EXPECT_TRUE(a.Finish().ok());
}

TEST_F(Assembler, DestinationErrorsFailTheChunk) {
  SliceAssembler a = Make();
  absl::Status s = a.Add(Chunk("b", {3}, 1, 2, {1, 1}), [](const SliceRange&) -> absl::StatusOr<float*> {
    return absl::ResourceExhaustedError("no buffer");
  });
  EXPECT_EQ(s.code(), absl::StatusCode::kResourceExhausted);
}

// A 10,000-element chunk received in pieces cut at odd byte offsets (the
// copy checks 16 KB blocks as it writes them): every value arrives exactly,
// and a NaN anywhere, in a block or the tail, fails the chunk.
TEST(SliceAssembler, ChecksEveryValueOfAChunkInPieces) {
  const ModelSpec spec = {{"big", {10000}}};
  auto layout = MakeSliceLayout(spec, 1, 0);
  std::vector<float> values(10000);
  for (size_t i = 0; i < values.size(); ++i) values[i] = 0.5f * float(i) - 7.0f;
  for (size_t bad : {size_t{0}, size_t{4095}, size_t{4096}, size_t{8191}, size_t{8192},
                     size_t{9999}, values.size()}) {
    std::vector<float> sent = values;
    if (bad < sent.size()) sent[bad] = std::nanf("");
    const std::string bytes(reinterpret_cast<const char*>(sent.data()), sent.size() * 4);
    const absl::string_view all(bytes);
    RawTensorSlice c{"big", {10000}, 0, 10000,
                     {all.substr(0, 1), all.substr(1, 16386), all.substr(16387)}};
    for (bool reject : {true, false}) {
      SliceAssembler::Options o;
      o.reject_nonfinite = reject;
      SliceAssembler a(layout, o);
      std::vector<float> out(10000, -1.0f);
      const absl::Status s =
          a.Add(c, [&](const SliceRange&) -> absl::StatusOr<float*> { return out.data(); });
      const bool want_ok = !reject || bad == values.size();
      EXPECT_EQ(s.ok(), want_ok) << "NaN at " << bad << ", reject " << reject << ": " << s;
      if (want_ok) {
        EXPECT_EQ(std::memcmp(out.data(), sent.data(), bytes.size()), 0) << bad;
      }
    }
  }
}

TEST(AllFinite, FindsABadValueAnywhere) {
  std::vector<float> v(10000, 1.0f);
  EXPECT_TRUE(AllFinite(v.data(), v.size()));
  for (size_t at : {size_t{0}, size_t{4095}, size_t{4096}, size_t{9999}}) {
    std::vector<float> w = v;
    w[at] = std::nanf("");
    EXPECT_FALSE(AllFinite(w.data(), w.size())) << at;
  }
}

}  // namespace
}  // namespace ps
