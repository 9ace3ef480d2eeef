#include "rpc/credentials.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(IsLoopbackAddress, KnowsLoopbackHosts) {
  for (absl::string_view a : {"127.0.0.1:1", "127.1.2.3:50051", "localhost:5", "[::1]:5"}) {
    EXPECT_TRUE(IsLoopbackAddress(a)) << a;
  }
  for (absl::string_view a : {"0.0.0.0:50051", "10.0.0.1:1", "[::]:1", "ps-server-0:50051",
                              "128.0.0.1:1", "localhost.example.com:1", "[::1:5"}) {
    EXPECT_FALSE(IsLoopbackAddress(a)) << a;
  }
}

TEST(CheckSecurityOptions, PlaintextOnlyOnLoopbackUnlessInsecure) {
  SecurityOptions plain;
  EXPECT_TRUE(CheckSecurityOptions(plain, "127.0.0.1:0", true).ok());
  absl::Status s = CheckSecurityOptions(plain, "0.0.0.0:50051", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.message().find("--insecure"), absl::string_view::npos) << s;
  EXPECT_FALSE(CheckSecurityOptions(plain, "ps-server-0:50051", false).ok());
  plain.insecure = true;
  EXPECT_TRUE(CheckSecurityOptions(plain, "0.0.0.0:50051", true).ok());
}

TEST(CheckSecurityOptions, RejectsInconsistentFlags) {
  SecurityOptions o;
  o.auth_token_file = "/dev/null";
  EXPECT_NE(CheckSecurityOptions(o, "127.0.0.1:1", true).message().find("needs TLS"),
            absl::string_view::npos);
  o = SecurityOptions();
  o.tls_cert = "/dev/null";
  EXPECT_FALSE(CheckSecurityOptions(o, "127.0.0.1:1", true).ok());  // no key
  o.tls_key = "/nonexistent/key.pem";
  EXPECT_NE(CheckSecurityOptions(o, "127.0.0.1:1", true).message().find("cannot read"),
            absl::string_view::npos);
  o = SecurityOptions();
  o.tls_cert = o.tls_key = "/dev/null";
  EXPECT_TRUE(CheckSecurityOptions(o, "0.0.0.0:1", true).ok());
  EXPECT_FALSE(CheckSecurityOptions(o, "10.0.0.1:1", false).ok());  // a client needs a CA
  o = SecurityOptions();
  o.tls_ca = "/dev/null";
  EXPECT_FALSE(CheckSecurityOptions(o, "0.0.0.0:1", true).ok());  // a server needs a cert
  EXPECT_TRUE(CheckSecurityOptions(o, "10.0.0.1:1", false).ok());
  o.tls_server_name = "ps-server-0";
  EXPECT_TRUE(CheckSecurityOptions(o, "10.0.0.1:1", false).ok());
  o.tls_ca.clear();
  EXPECT_FALSE(CheckSecurityOptions(o, "127.0.0.1:1", false).ok());
}

TEST(CheckSecurityOptions, UnixSocketClientsNeedNoTlsButAnAbsolutePath) {
  SecurityOptions o;
  EXPECT_TRUE(CheckSecurityOptions(o, "unix:/run/ps/shard-0.sock", false).ok());
  o.auth_token_file = "/dev/null";  // tokens travel over a unix socket too
  EXPECT_TRUE(CheckSecurityOptions(o, "unix:/run/ps/shard-0.sock", false).ok());
  absl::Status s = CheckSecurityOptions(o, "unix:shard-0.sock", false);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_NE(s.message().find("absolute path"), absl::string_view::npos) << s;
}

TEST(CheckSecurityOptions, UnixSocketServerNeedsAPrivateFolder) {
  SecurityOptions o;
  // "/" has mode 0755: anyone could reach a socket there.
  absl::Status s = CheckSecurityOptions(o, "unix:/ps-shard-0.sock", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  EXPECT_NE(s.message().find("--listen=unix:/ps-shard-0.sock"), absl::string_view::npos) << s;
  s = CheckSecurityOptions(o, "unix:/nonexistent-ps-folder/s.sock", true);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << s;
  // --insecure skips the folder check.
  o.insecure = true;
  EXPECT_TRUE(CheckSecurityOptions(o, "unix:/ps-shard-0.sock", true).ok());
}

}  // namespace
}  // namespace ps
