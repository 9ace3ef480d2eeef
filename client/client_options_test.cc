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

TEST(ValidateClientOptions, AcceptsTheDefaultsAndKeepaliveOff) {
  ClientOptions o;
  EXPECT_TRUE(ValidateClientOptions(o).ok());
  o.keepalive = absl::ZeroDuration();
  EXPECT_TRUE(ValidateClientOptions(o).ok());
  o.keepalive = absl::Hours(24);
  EXPECT_TRUE(ValidateClientOptions(o).ok());
}

TEST(ValidateClientOptions, RejectsKeepaliveOutsideItsRangeNamingTheValue) {
  ClientOptions o;
  for (absl::Duration bad : {absl::Seconds(-1), absl::Milliseconds(500), absl::Hours(25)}) {
    o.keepalive = bad;
    const absl::Status s = ValidateClientOptions(o);
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(s.message(), testing::HasSubstr("--keepalive must be 0 (off) or 1..86400"));
  }
  o.keepalive = absl::Milliseconds(500);
  EXPECT_THAT(std::string(ValidateClientOptions(o).message()), testing::EndsWith("got 0.5"));
}

TEST(ValidateClientOptions, RejectsANegativeRetryTimeout) {
  ClientOptions o;
  o.retry_timeout = absl::Seconds(-1);
  EXPECT_THAT(ValidateClientOptions(o).message(),
              testing::HasSubstr("--retry_timeout must be >= 0"));
}

}  // namespace
}  // namespace ps
