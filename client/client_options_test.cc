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

}  // namespace
}  // namespace ps
