// The raw wire path produces and accepts exactly the protobuf encoding of the
// ps.v1 messages, and rejects malformed bytes with an error, never a crash.
#include "rpc/raw_wire.h"

#include <random>

#include "gtest/gtest.h"
#include "proto/ps.pb.h"

namespace ps {
namespace {

const ModelSpec kSpec = {{"w", {3, 5}}, {"b", {7}}, {"scalar", {}}};

std::string Flatten(const grpc::ByteBuffer& bb) {
  ReceivedBytes r;
  EXPECT_TRUE(Receive(bb, &r).ok());
  std::string s;
  for (absl::string_view p : r.pieces) s.append(p.data(), p.size());
  return s;
}

// Splits `s` into pieces of 1..7 bytes, as a network might.
Pieces Split(const std::string& s, std::mt19937* rng) {
  Pieces out;
  for (size_t i = 0; i < s.size();) {
    const size_t n = std::min<size_t>(1 + (*rng)() % 7, s.size() - i);
    out.push_back(absl::string_view(s).substr(i, n));
    i += n;
  }
  return out;
}

TensorList Values() {
  TensorList v;
  for (const TensorSpec& t : kSpec) {
    std::vector<float> x(t.num_elements());
    for (size_t i = 0; i < x.size(); ++i) x[i] = 0.25f * i - 1;
    v.push_back(x);
  }
  return v;
}

SliceValues From(const TensorList& v) {
  return [&v](const SliceRange& r) { return v[r.tensor_index].data() + r.offset; };
}

TEST(RawWire, PushPullRequestParsesAsTheProtobufMessage) {
  const auto slices = ShardSlices(kSpec, 2, 1);
  const TensorList v = Values();
  const std::string bytes =
      Flatten(EncodePushPullRequest(-3, 42, kSpec, slices, From(v), 43, 5000));
  v1::PushPullRequest msg;
  ASSERT_TRUE(msg.ParseFromString(bytes));
  EXPECT_EQ(msg.push().worker_id(), -3);
  EXPECT_EQ(msg.push().version(), 42);
  EXPECT_EQ(msg.min_version(), 43);
  EXPECT_EQ(msg.wait_timeout_ms(), 5000);
  ASSERT_EQ(msg.push().gradients_size(), static_cast<int>(slices.size()));
  for (size_t i = 0; i < slices.size(); ++i) {
    const v1::TensorSlice& s = msg.push().gradients(i);
    const SliceRange& r = slices[i];
    EXPECT_EQ(s.name(), kSpec[r.tensor_index].name);
    EXPECT_EQ(std::vector<int64_t>(s.shape().begin(), s.shape().end()), kSpec[r.tensor_index].shape);
    EXPECT_EQ(s.offset(), r.offset);
    EXPECT_EQ(s.length(), r.length);
    EXPECT_EQ(s.data(), std::string(reinterpret_cast<const char*>(From(v)(r)), r.length * 4));
  }
}

TEST(RawWire, DecodesProtobufEncodedMessagesFromAnySplit) {
  std::mt19937 rng(5);
  v1::PushPullRequest msg;
  msg.set_min_version(9);
  msg.set_wait_timeout_ms(77);
  v1::PushRequest* push = msg.mutable_push();
  push->set_worker_id(2);
  push->set_version(8);
  v1::TensorSlice* s = push->add_gradients();
  s->set_name("w");
  s->add_shape(3);
  s->add_shape(5);
  s->set_offset(4);
  s->set_length(3);
  const float data[3] = {1.5f, -2.0f, 3.0f};
  s->set_data(std::string(reinterpret_cast<const char*>(data), sizeof(data)));
  const std::string bytes = msg.SerializeAsString();
  for (int i = 0; i < 20; ++i) {
    RawPush p;
    RawPull q;
    ASSERT_TRUE(DecodePushPullRequest(Split(bytes, &rng), &p, &q).ok());
    EXPECT_EQ(p.worker_id, 2);
    EXPECT_EQ(p.version, 8);
    EXPECT_EQ(q.min_version, 9);
    EXPECT_EQ(q.wait_timeout_ms, 77);
    ASSERT_EQ(p.gradients.size(), 1u);
    EXPECT_EQ(p.gradients[0].name, "w");
    EXPECT_EQ(p.gradients[0].shape, (std::vector<int64_t>{3, 5}));
    EXPECT_EQ(p.gradients[0].offset, 4);
    float out[3];
    ASSERT_EQ(PiecesSize(p.gradients[0].data), sizeof out);
    CopyPieces(p.gradients[0].data, out);
    EXPECT_EQ(out[0], 1.5f);
    EXPECT_EQ(out[2], 3.0f);
  }
}

TEST(RawWire, PullResponseRoundTrips) {
  const auto slices = ShardSlices(kSpec, 1, 0);
  const TensorList v = Values();
  auto owner = std::make_shared<int>(0);
  const std::string bytes = Flatten(EncodePullResponse(7, kSpec, slices, From(v), owner));
  v1::PullResponse msg;
  ASSERT_TRUE(msg.ParseFromString(bytes));
  EXPECT_EQ(msg.version(), 7);
  EXPECT_EQ(msg.weights_size(), 3);
  int64_t version = 0;
  std::vector<RawTensorSlice> got;
  ASSERT_TRUE(DecodePullResponse({bytes}, &version, &got).ok());
  EXPECT_EQ(version, 7);
  ASSERT_EQ(got.size(), 3u);
  EXPECT_EQ(got[2].name, "scalar");
  EXPECT_TRUE(got[2].shape.empty());
}

TEST(RawWire, TruncatedAndRandomBytesAreErrorsNotCrashes) {
  const TensorList v = Values();
  const std::string bytes =
      Flatten(EncodePushRequest(1, 2, kSpec, ShardSlices(kSpec, 1, 0), From(v)));
  for (size_t cut = 1; cut < bytes.size(); ++cut) {
    RawPush p;
    // Some prefixes end on a field boundary and are valid (shorter) messages.
    (void)DecodePushRequest({absl::string_view(bytes).substr(0, cut)}, &p);
  }
  RawPush p;
  EXPECT_FALSE(DecodePushRequest({absl::string_view(bytes).substr(0, bytes.size() - 1)}, &p).ok());
  std::mt19937 rng(11);
  int rejected = 0;
  for (int i = 0; i < 2000; ++i) {
    std::string junk(1 + rng() % 64, '\0');
    for (char& c : junk) c = static_cast<char>(rng());
    RawPush q;
    RawPull r;
    int64_t version;
    std::vector<RawTensorSlice> w;
    rejected += !DecodePushRequest({junk}, &q).ok();
    (void)DecodePushPullRequest({junk}, &q, &r);
    (void)DecodePullRequest({junk}, &r);
    (void)DecodePullResponse({junk}, &version, &w);
  }
  EXPECT_GT(rejected, 1000);
}

}  // namespace
}  // namespace ps
