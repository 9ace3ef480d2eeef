#include "client/client_options.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(ParseTransport, AcceptsStreamAndUnary) {
  absl::StatusOr<ClientOptions::Transport> stream = ParseTransport("stream");
  ASSERT_TRUE(stream.ok()) << stream.status();
  EXPECT_EQ(*stream, ClientOptions::Transport::kStream);
  absl::StatusOr<ClientOptions::Transport> unary = ParseTransport("unary");
  ASSERT_TRUE(unary.ok()) << unary.status();
  EXPECT_EQ(*unary, ClientOptions::Transport::kUnary);
}

TEST(ParseTransport, RejectsOthersNamingTheChoices) {
  for (absl::string_view text : {"", "Stream", "grpc", "unary "}) {
    absl::StatusOr<ClientOptions::Transport> t = ParseTransport(text);
    ASSERT_FALSE(t.ok()) << text;
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(t.status().message(), testing::HasSubstr("expected 'stream' or 'unary'"));
  }
}

TEST(ClientOptions, DefaultsToTheStreamTransport) {
  EXPECT_EQ(ClientOptions().transport, ClientOptions::Transport::kStream);
}

// The defaults with a server: what every connection needs at least.
ClientOptions WithAServer() {
  ClientOptions o;
  o.servers = {"127.0.0.1:50051"};
  return o;
}

TEST(ValidateClientOptions, AcceptsTheDefaultsAndKeepaliveOff) {
  ClientOptions o = WithAServer();
  EXPECT_TRUE(ValidateClientOptions(o).ok());
  o.keepalive = absl::ZeroDuration();
  EXPECT_TRUE(ValidateClientOptions(o).ok());
  o.keepalive = absl::Hours(24);
  EXPECT_TRUE(ValidateClientOptions(o).ok());
}

TEST(ValidateClientOptions, RejectsNoServersAndAWorkerIdOutOfRange) {
  EXPECT_THAT(ValidateClientOptions(ClientOptions()).message(),
              testing::HasSubstr("no servers given"));
  ClientOptions o = WithAServer();
  o.num_workers = 2;
  o.worker_id = 2;
  EXPECT_THAT(ValidateClientOptions(o).message(),
              testing::HasSubstr("worker_id must be in [0, num_workers=2), got 2"));
  o.worker_id = -1;
  EXPECT_EQ(ValidateClientOptions(o).code(), absl::StatusCode::kInvalidArgument);
}

TEST(ValidateClientOptions, RejectsKeepaliveOutsideItsRangeNamingTheValue) {
  ClientOptions o = WithAServer();
  for (absl::Duration bad : {absl::Seconds(-1), absl::Milliseconds(500), absl::Hours(25)}) {
    o.keepalive = bad;
    const absl::Status s = ValidateClientOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), testing::HasSubstr("--keepalive must be 0 (off) or 1..86400"));
  }
  o.keepalive = absl::Milliseconds(500);
  EXPECT_THAT(std::string(ValidateClientOptions(o).message()), testing::EndsWith("got 0.5"));
}

TEST(ParseWireDtype, AcceptsF32AndBf16AndNothingElse) {
  EXPECT_EQ(ClientOptions().wire_dtype, WireDtype::kF32);
  ASSERT_TRUE(ParseWireDtype("f32").ok());
  EXPECT_EQ(*ParseWireDtype("f32"), WireDtype::kF32);
  ASSERT_TRUE(ParseWireDtype("bf16").ok());
  EXPECT_EQ(*ParseWireDtype("bf16"), WireDtype::kBf16);
  for (absl::string_view text : {"", "F32", "fp16", "bf16 "}) {
    absl::StatusOr<WireDtype> d = ParseWireDtype(text);
    ASSERT_FALSE(d.ok()) << text;
    EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(d.status().message(), testing::HasSubstr("expected 'f32' or 'bf16'"));
  }
}

TEST(ValidateClientOptions, RejectsAnUnknownWireDtype) {
  ClientOptions o = WithAServer();
  o.wire_dtype = WireDtype::kBf16;
  EXPECT_TRUE(ValidateClientOptions(o).ok());
  o.wire_dtype = static_cast<WireDtype>(7);
  EXPECT_THAT(ValidateClientOptions(o).message(), testing::HasSubstr("wire_dtype"));
}

TEST(ValidateClientOptions, RejectsAnInterruptCheckPolledNever) {
  ClientOptions o = WithAServer();
  o.interrupt = [] { return false; };
  EXPECT_TRUE(ValidateClientOptions(o).ok());
  o.interrupt_every = absl::ZeroDuration();
  EXPECT_THAT(ValidateClientOptions(o).message(), testing::HasSubstr("interrupt_every"));
}

TEST(ValidateClientOptions, RejectsANegativeRetryTimeout) {
  ClientOptions o = WithAServer();
  o.retry_timeout = absl::Seconds(-1);
  EXPECT_THAT(ValidateClientOptions(o).message(),
              testing::HasSubstr("--retry_timeout must be >= 0"));
}

}  // namespace
}  // namespace ps
