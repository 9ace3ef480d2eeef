// ProtoFuzzer: at rate 0 it writes exactly the valid message; mutations,
// random messages and garbling are deterministic per seed; NotProtobuf never
// parses.
#include "tests/proto_fuzzer.h"

#include "absl/strings/escaping.h"
#include "google/protobuf/util/message_differencer.h"
#include "gtest/gtest.h"
#include "proto/health.pb.h"
#include "proto/ps.pb.h"

namespace ps {
namespace {

using google::protobuf::Message;
using google::protobuf::util::MessageDifferencer;

// Valid messages that use every kind of field in ps.proto: scalars, enums,
// strings, bytes, packed repeated int64, nested and repeated messages.
std::vector<std::unique_ptr<Message>> ValidMessages() {
  std::vector<std::unique_ptr<Message>> out;
  auto push = std::make_unique<v1::PushPullRequest>();
  push->mutable_push()->set_worker_id(-3);
  push->mutable_push()->set_version(INT64_MAX);
  for (int i = 0; i < 2; ++i) {
    v1::TensorSlice* s = push->mutable_push()->add_gradients();
    s->set_name(i == 0 ? "fc1.weight" : "fc1.bias");
    s->add_shape(784);
    s->add_shape(-1);
    s->set_offset(INT64_MIN);
    s->set_length(7);
    s->set_data(std::string(28, '\x7f'));
  }
  push->set_min_version(1);
  push->set_wait_timeout_ms(-1);
  out.push_back(std::move(push));
  auto stream = std::make_unique<v1::StreamRequest>();
  stream->set_call_id(~uint64_t{0});
  stream->set_kind(v1::CALL_PUSH_PULL);
  stream->set_last(true);
  out.push_back(std::move(stream));
  auto status = std::make_unique<v1::StatusResponse>();
  status->set_mean_staleness(0.5);
  status->set_learning_rate(0.1f);
  status->add_workers_seen(0);
  status->add_workers_seen(INT32_MIN);
  out.push_back(std::move(status));
  auto health = std::make_unique<grpc::health::v1::HealthCheckRequest>();
  health->set_service("ps.v1.ParameterServer");
  out.push_back(std::move(health));
  return out;
}

TEST(ProtoFuzzer, RateZeroWritesTheValidMessage) {
  FieldHints hints;
  ProtoFuzzer fz(1, &hints);
  for (const auto& m : ValidMessages()) {
    const std::string bytes = fz.Mutate(*m, 0);
    EXPECT_FALSE(fz.changed());
    std::unique_ptr<Message> back(m->New());
    ASSERT_TRUE(back->ParseFromString(bytes)) << m->GetTypeName();
    EXPECT_TRUE(MessageDifferencer::Equals(*m, *back))
        << m->ShortDebugString() << " vs " << back->ShortDebugString();
  }
}

TEST(ProtoFuzzer, SameSeedSameBytes) {
  FieldHints hints;
  hints.AddStrings("ps.v1.TensorSlice.name", {"fc1.bias"});
  hints.float_data.insert("ps.v1.TensorSlice.data");
  for (const auto& m : ValidMessages()) {
    for (double rate : {0.05, 0.3, 1.0}) {
      ProtoFuzzer a(42, &hints), b(42, &hints);
      EXPECT_EQ(a.Mutate(*m, rate), b.Mutate(*m, rate)) << m->GetTypeName() << " rate " << rate;
      EXPECT_EQ(a.Random(m->GetDescriptor()), b.Random(m->GetDescriptor()));
      EXPECT_EQ(a.NotProtobuf(), b.NotProtobuf());
    }
  }
}

TEST(ProtoFuzzer, RateOneChangesTheMessage) {
  FieldHints hints;
  ProtoFuzzer fz(7, &hints);
  for (const auto& m : ValidMessages()) {
    fz.Mutate(*m, 1.0);
    EXPECT_TRUE(fz.changed()) << m->GetTypeName();
  }
}

TEST(ProtoFuzzer, NotProtobufNeverParsesAndGarbleAlwaysChanges) {
  FieldHints hints;
  ProtoFuzzer fz(3, &hints);
  for (int i = 0; i < 500; ++i) {
    const std::string bytes = fz.NotProtobuf();
    v1::StreamRequest stream;
    v1::PushRequest push;
    EXPECT_FALSE(stream.ParseFromString(bytes)) << absl::CHexEscape(bytes);
    EXPECT_FALSE(push.ParseFromString(bytes)) << absl::CHexEscape(bytes);
    for (const auto& m : ValidMessages()) {
      const std::string valid = fz.Mutate(*m, 0);
      EXPECT_NE(fz.Garble(valid), valid);
    }
  }
}

}  // namespace
}  // namespace ps
