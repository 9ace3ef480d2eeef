// The raw wire path produces and accepts exactly the protobuf encoding of the
// ps.v1 messages, and rejects malformed bytes with an error, never a crash.
#include "rpc/raw_wire.h"

#include <cstdio>
#include <cstring>
#include <random>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "common/float_bytes.h"
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
    EXPECT_EQ(std::vector<int64_t>(s.shape().begin(), s.shape().end()),
              kSpec[r.tensor_index].shape);
    EXPECT_EQ(s.offset(), r.offset);
    EXPECT_EQ(s.length(), r.length);
    EXPECT_EQ(s.data(), std::string(reinterpret_cast<const char*>(From(v)(r)), r.length * 4));
  }
}

// The bf16 wire: each slice says BF16 and carries the values rounded to
// nearest even, 2 bytes each; the request asks for bf16 weights.
TEST(RawWire, Bf16PushPullRequestParsesAsTheProtobufMessage) {
  const auto slices = ShardSlices(kSpec, 2, 1);
  TensorList v = Values();
  for (std::vector<float>& t : v) {
    for (float& x : t) x += 1.0f / 1024;  // not exact in bf16
  }
  const std::string bytes =
      Flatten(EncodePushPullRequest(1, 2, kSpec, slices, From(v), 3, 4, 0, WireDtype::kBf16));
  v1::PushPullRequest msg;
  ASSERT_TRUE(msg.ParseFromString(bytes));
  EXPECT_EQ(msg.weights_dtype(), v1::BF16);
  ASSERT_EQ(msg.push().gradients_size(), static_cast<int>(slices.size()));
  for (size_t i = 0; i < slices.size(); ++i) {
    const v1::TensorSlice& s = msg.push().gradients(i);
    const SliceRange& r = slices[i];
    EXPECT_EQ(s.dtype(), v1::BF16);
    ASSERT_EQ(s.data().size(), static_cast<size_t>(r.length) * 2);
    for (int64_t j = 0; j < r.length; ++j) {
      uint16_t h;
      std::memcpy(&h, s.data().data() + 2 * j, 2);
      EXPECT_EQ(h, FloatToBf16(From(v)(r)[j])) << s.name() << "[" << r.offset + j << "]";
    }
  }
  // And it decodes back, from any split, into the rounded values.
  std::mt19937 rng(11);
  RawPush push;
  RawPull pull;
  ASSERT_TRUE(DecodePushPullRequest(Split(bytes, &rng), &push, &pull).ok());
  EXPECT_EQ(pull.weights_dtype, WireDtype::kBf16);
  ASSERT_EQ(push.gradients.size(), slices.size());
  for (size_t i = 0; i < slices.size(); ++i) {
    EXPECT_EQ(push.gradients[i].dtype, WireDtype::kBf16);
    std::vector<float> out(slices[i].length);
    WidenBf16Pieces(push.gradients[i].data, out.data());
    for (size_t j = 0; j < out.size(); ++j) {
      EXPECT_EQ(out[j], RoundToBf16(From(v)(slices[i])[j]));
    }
  }
}

// Bytes per worker step for the MLP 784-512-256-10 (535,818 weights, one
// shard): a push-pull request and its reply, f32 against bf16. Printed for
// docs/benchmarks.md; checked against the payload arithmetic.
TEST(RawWire, Bf16HalvesTheBytesOfAnMlpStep) {
  const ModelSpec mlp = {{"fc1.weight", {512, 784}}, {"fc1.bias", {512}},
                         {"fc2.weight", {256, 512}}, {"fc2.bias", {256}},
                         {"fc3.weight", {10, 256}},  {"fc3.bias", {10}}};
  int64_t n = 0;
  for (const TensorSpec& t : mlp) n += t.num_elements();
  ASSERT_EQ(n, 535818);
  const auto slices = ShardSlices(mlp, 1, 0);
  TensorList v;
  for (const TensorSpec& t : mlp) v.emplace_back(t.num_elements(), 0.5f);
  auto step_bytes = [&](WireDtype d) {
    const size_t request =
        Flatten(EncodePushPullRequest(0, 7, mlp, slices, From(v), 8, 120000, 0, d)).size();
    const size_t reply =
        Flatten(EncodePullResponse(8, mlp, slices, From(v), nullptr, ReplyInfo(), d)).size();
    return std::make_pair(request, reply);
  };
  const auto [f32_req, f32_reply] = step_bytes(WireDtype::kF32);
  const auto [bf16_req, bf16_reply] = step_bytes(WireDtype::kBf16);
  std::printf("MLP step, unary push_pull: f32 %zu + %zu = %zu bytes, bf16 %zu + %zu = %zu bytes\n",
              f32_req, f32_reply, f32_req + f32_reply, bf16_req, bf16_reply, bf16_req + bf16_reply);
  // The payload halves (2 bytes fewer per element); the framing grows by a
  // dtype field per slice (and weights_dtype once), and shrinks where a
  // length prefix got shorter.
  EXPECT_GE(f32_req - bf16_req, size_t{2} * n - 8 * mlp.size());
  EXPECT_LE(f32_req - bf16_req, size_t{2} * n);
  EXPECT_GE(f32_reply - bf16_reply, size_t{2} * n - 8 * mlp.size());
  EXPECT_LE(f32_reply - bf16_reply, size_t{2} * n);
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

TEST(RawWire, FaultFieldsRoundTripAsTheProtobufMessages) {
  const Incarnation inc{0xfedcba9876543210u, 3};
  const auto slices = ShardSlices(kSpec, 2, 0);
  const TensorList v = Values();
  // The push's seq, in both push messages and the stream header.
  v1::PushPullRequest pp;
  ASSERT_TRUE(pp.ParseFromString(
      Flatten(EncodePushPullRequest(1, 4, kSpec, slices, From(v), 5, 100, /*seq=*/77))));
  EXPECT_EQ(pp.push().seq(), 77);
  RawPush push;
  RawPull pull;
  const std::string pp_bytes = pp.SerializeAsString();
  ASSERT_TRUE(DecodePushPullRequest({pp_bytes}, &push, &pull).ok());
  EXPECT_EQ(push.seq, 77);
  StreamCallHeader h;
  h.call_id = 9;
  h.seq = 12;
  std::vector<grpc::ByteBuffer> reqs =
      EncodeStreamRequests(h, /*first=*/true, /*last=*/true, kSpec, slices, From(v));
  RawStreamRequest sr;
  const std::string sr_bytes = Flatten(reqs[0]);
  ASSERT_TRUE(DecodeStreamRequest({sr_bytes}, &sr).ok());
  EXPECT_EQ(sr.header.seq, 12);
  // Replies: outcome and incarnation.
  v1::PushResponse pr;
  const std::string pr_bytes = Flatten(EncodePushResponse(8, PushOutcome::kDropped, inc));
  ASSERT_TRUE(pr.ParseFromString(pr_bytes));
  EXPECT_EQ(pr.outcome(), v1::PUSH_DROPPED);
  EXPECT_EQ(pr.incarnation().run_id(), inc.run_id);
  int64_t version = 0;
  ReplyInfo info;
  ASSERT_TRUE(DecodePushResponse({pr_bytes}, &version, &info).ok());
  EXPECT_EQ(version, 8);
  EXPECT_EQ(info.outcome, PushOutcome::kDropped);
  EXPECT_EQ(info.incarnation, inc);
  const std::string pull_bytes = Flatten(EncodePullResponse(
      6, kSpec, slices, From(v), nullptr, ReplyInfo{inc, PushOutcome::kDuplicate}));
  v1::PullResponse pl;
  ASSERT_TRUE(pl.ParseFromString(pull_bytes));
  EXPECT_EQ(pl.push_outcome(), v1::PUSH_DUPLICATE);
  EXPECT_EQ(pl.incarnation().start(), 3);
  std::vector<RawTensorSlice> got;
  info = ReplyInfo();
  ASSERT_TRUE(DecodePullResponse({pull_bytes}, &version, &got, &info).ok());
  EXPECT_EQ(info.outcome, PushOutcome::kDuplicate);
  EXPECT_EQ(info.incarnation, inc);
  // The stream: the first weights message carries them, later ones do not.
  std::vector<grpc::ByteBuffer> resps =
      EncodeStreamWeights(9, 6, kSpec, slices, From(v), nullptr, /*chunk_bytes=*/16,
                          ReplyInfo{inc, PushOutcome::kDropped});
  ASSERT_GT(resps.size(), 1u);
  RawStreamResponse first, second;
  const std::string b0 = Flatten(resps[0]), b1 = Flatten(resps[1]);
  ASSERT_TRUE(DecodeStreamResponse({b0}, &first).ok());
  ASSERT_TRUE(DecodeStreamResponse({b1}, &second).ok());
  EXPECT_EQ(first.info.incarnation, inc);
  EXPECT_EQ(first.info.outcome, PushOutcome::kDropped);
  EXPECT_EQ(second.info.incarnation.run_id, 0u);
  RawStreamResponse done;
  const std::string bd =
      Flatten(EncodeStreamDone(9, 6, absl::OkStatus(), ReplyInfo{inc, PushOutcome::kDuplicate}));
  ASSERT_TRUE(DecodeStreamResponse({bd}, &done).ok());
  EXPECT_EQ(done.info.outcome, PushOutcome::kDuplicate);
  // An outcome the wire does not know is malformed, not a crash.
  v1::PushResponse bad;
  bad.set_outcome(static_cast<v1::PushOutcome>(7));
  const std::string bad_bytes = bad.SerializeAsString();
  EXPECT_EQ(DecodePushResponse({bad_bytes}, &version, &info).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(RawWire, StreamRowsCallsRoundTripAsTheProtobufMessages) {
  StreamCallHeader h;
  h.call_id = 5;
  h.kind = StreamCall::kPushRows;
  h.worker_id = 2;
  h.version = 9;
  h.seq = 4;
  h.table = "user";
  const std::vector<uint64_t> ids = {3, 1ull << 63, 7};
  const std::vector<float> grads = {1, -2, 0.5f, 3, -0.0f, 8};
  v1::StreamRequest req;
  const std::string bytes = Flatten(EncodeStreamRowsRequest(h, ids, grads));
  ASSERT_TRUE(req.ParseFromString(bytes));
  EXPECT_EQ(req.kind(), v1::CALL_PUSH_ROWS);
  EXPECT_EQ(req.table(), "user");
  EXPECT_EQ(std::vector<uint64_t>(req.ids().begin(), req.ids().end()), ids);
  EXPECT_EQ(req.row_grads().size(), grads.size() * 4);
  EXPECT_TRUE(req.last());
  EXPECT_EQ(req.seq(), 4);
  // The protobuf encoding decodes from any split, and so do unpacked ids.
  std::mt19937 rng(3);
  const std::string proto_bytes = req.SerializeAsString();
  for (int trial = 0; trial < 20; ++trial) {
    RawStreamRequest raw;
    ASSERT_TRUE(DecodeStreamRequest(Split(proto_bytes, &rng), &raw).ok());
    EXPECT_EQ(raw.header.kind, StreamCall::kPushRows);
    EXPECT_EQ(raw.header.table, "user");
    EXPECT_EQ(raw.ids, ids);
    std::vector<float> g(PiecesSize(raw.row_grads) / 4);
    CopyPieces(raw.row_grads, g.data());
    EXPECT_EQ(g, grads);
  }
  // A push-pull of rows carries its gradients as a push does; a pull none.
  h.kind = StreamCall::kPushPullRows;
  ASSERT_TRUE(req.ParseFromString(Flatten(EncodeStreamRowsRequest(h, ids, grads))));
  EXPECT_EQ(req.kind(), v1::CALL_PUSH_PULL_ROWS);
  EXPECT_EQ(req.row_grads().size(), grads.size() * 4);
  h.kind = StreamCall::kPullRows;
  ASSERT_TRUE(req.ParseFromString(Flatten(EncodeStreamRowsRequest(h, ids, grads))));
  EXPECT_TRUE(req.row_grads().empty());
  std::string unpacked;
  for (uint64_t id : ids) {
    unpacked.push_back(static_cast<char>((12 << 3) | 1));  // field 12, fixed64
    for (int b = 0; b < 8; ++b) unpacked.push_back(static_cast<char>(id >> (8 * b)));
  }
  RawStreamRequest raw;
  ASSERT_TRUE(DecodeStreamRequest({unpacked}, &raw).ok());
  EXPECT_EQ(raw.ids, ids);
  // Ids that are not whole fixed64s, and an unknown kind, are errors.
  v1::StreamRequest bad;
  bad.set_kind(static_cast<v1::CallKind>(6));
  EXPECT_FALSE(DecodeStreamRequest({bad.SerializeAsString()}, &raw).ok());
  const std::string short_ids = std::string("\x62\x03", 2) + "abc";  // field 12, 3 bytes
  EXPECT_FALSE(DecodeStreamRequest({short_ids}, &raw).ok());
  // Pulled rows come back in pieces of the chunk size, in order.
  auto rows = std::make_shared<const std::vector<float>>(std::vector<float>{1, 2, 3, 4, 5});
  const std::vector<grpc::ByteBuffer> replies =
      EncodeStreamRows(5, 11, rows, ReplyInfo(), /*chunk_bytes=*/8);
  ASSERT_EQ(replies.size(), 3u);
  std::vector<float> got;
  for (size_t i = 0; i < replies.size(); ++i) {
    v1::StreamResponse r;
    ASSERT_TRUE(r.ParseFromString(Flatten(replies[i])));
    EXPECT_EQ(r.call_id(), 5u);
    EXPECT_EQ(r.last(), i + 1 == replies.size());
    const size_t n = r.rows().size() / 4;
    got.resize(got.size() + n);
    memcpy(got.data() + got.size() - n, r.rows().data(), r.rows().size());
  }
  EXPECT_EQ(got, *rows);
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

// The one field loop of every decoder (rpc/proto_codec.h).
TEST(ProtoCodec, ForEachFieldHandsOutFieldsInOrderAcrossPieces) {
  // field 1 = 150 (varint), field 2 = "abc", field 1 = 7; split mid-varint.
  const std::string bytes(
      "\x08\x96\x01\x12\x03"
      "abc"
      "\x08\x07",
      10);
  Pieces pieces = {absl::string_view(bytes).substr(0, 2), absl::string_view(bytes).substr(2)};
  std::vector<std::string> seen;
  absl::Status s = ForEachField(pieces, "Msg", [&](FieldReader& f) {
    if (f.Is(1, kVarint)) {
      int64_t v = 0;
      absl::Status st = f.Int<int64_t>("bad one", &v);
      seen.push_back(absl::StrCat("1=", v));
      return st;
    }
    if (f.Is(2, kLen)) {
      std::string v;
      absl::Status st = f.String("bad two", &v);
      seen.push_back("2=" + v);
      return st;
    }
    return f.Skip();
  });
  ASSERT_TRUE(s.ok()) << s;
  EXPECT_EQ(seen, (std::vector<std::string>{"1=150", "2=abc", "1=7"}));
}

TEST(ProtoCodec, ForEachFieldNamesTheMessageInItsErrors) {
  auto decode = [](const std::string& bytes) {
    return ForEachField({bytes}, "Msg", [](FieldReader& f) {
      if (f.Is(1, kVarint)) return f.Error("handler says no");
      return f.Skip();
    });
  };
  EXPECT_EQ(decode(std::string("\x00", 1)).message(), "malformed Msg: bad tag");  // field 0
  EXPECT_EQ(decode("\x10").message(), "malformed Msg: bad field 2");  // varint cut short
  EXPECT_EQ(decode("\x08\x01").message(), "malformed Msg: handler says no");
  EXPECT_EQ(decode("\x08\x01").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(decode(std::string("\x10\x05\x1a\x00", 4)).ok());  // unknown fields skipped
}

}  // namespace
}  // namespace ps
