#include "rpc/authz.h"

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

Identity Id(absl::string_view name) {
  absl::StatusOr<Identity> id = ParseIdentity(name);
  EXPECT_TRUE(id.ok()) << id.status();
  return id.value_or(Identity{});
}

std::string M(absl::string_view call) { return absl::StrCat(kMethodPrefix, call); }

TEST(ParseIdentity, NamesRolesAndWorkerIds) {
  EXPECT_EQ(Id("worker-0").role, Role::kWorker);
  EXPECT_EQ(Id("worker-17").worker_id, 17);
  EXPECT_EQ(Id("reader").role, Role::kReader);
  EXPECT_EQ(Id("admin").role, Role::kAdmin);
  for (absl::string_view bad : {"", "worker-", "worker--1", "worker-01", "worker-1x", "worker-+1",
                                "Admin", "worker 1", "worker-99999999999", "root"}) {
    EXPECT_FALSE(ParseIdentity(bad).ok()) << bad;
  }
}

TEST(IdentityFromCertificate, CommonNameOrUri) {
  EXPECT_EQ(IdentityFromCertificate("worker-2", {}).value().worker_id, 2);
  EXPECT_EQ(IdentityFromCertificate("some host", {"ps://worker/5"}).value().name, "worker-5");
  EXPECT_EQ(IdentityFromCertificate("", {"ps://admin", "spiffe://x/y"}).value().name, "admin");
  EXPECT_EQ(IdentityFromCertificate("worker-5", {"ps://worker/5"}).value().name, "worker-5");
  // No identity, two identities, a ps:// URI that names none.
  EXPECT_EQ(IdentityFromCertificate("server-0", {}).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(IdentityFromCertificate("worker-1", {"ps://worker/0"}).status().code(),
            absl::StatusCode::kUnauthenticated);
  EXPECT_EQ(IdentityFromCertificate("", {"ps://worker/x"}).status().code(),
            absl::StatusCode::kUnauthenticated);
}

TEST(AuthorizeMethod, FollowsTheRoleTable) {
  const Identity worker = Id("worker-1"), reader = Id("reader"), admin = Id("admin");
  for (absl::string_view call :
       {"Register", "InitParams", "Push", "Pull", "PushPull", "Heartbeat", "Stream", "PullRows",
        "PushRows"}) {
    EXPECT_TRUE(AuthorizeMethod(worker, M(call)).ok()) << call;
  }
  for (absl::string_view call : {"GetStatus", "Checkpoint", "Future"}) {
    EXPECT_EQ(AuthorizeMethod(worker, M(call)).code(), absl::StatusCode::kPermissionDenied)
        << call;
  }
  for (absl::string_view call : {"Pull", "PullRows", "GetStatus"}) {
    EXPECT_TRUE(AuthorizeMethod(reader, M(call)).ok()) << call;
  }
  for (absl::string_view call :
       {"Register", "InitParams", "Push", "PushPull", "Heartbeat", "Stream", "Checkpoint",
        "PushRows"}) {
    EXPECT_EQ(AuthorizeMethod(reader, M(call)).code(), absl::StatusCode::kPermissionDenied)
        << call;
  }
  for (absl::string_view call : {"Push", "Checkpoint", "GetStatus", "Future"}) {
    EXPECT_TRUE(AuthorizeMethod(admin, M(call)).ok()) << call;
  }
  const std::string reflection = "/grpc.reflection.v1alpha.ServerReflection/ServerReflectionInfo";
  EXPECT_TRUE(AuthorizeMethod(admin, reflection).ok());
  EXPECT_FALSE(AuthorizeMethod(worker, reflection).ok());
  EXPECT_FALSE(AuthorizeMethod(reader, "/other.Service/Pull").ok());
}

TEST(AuthorizeMethod, DenialNamesIdentityAndCall) {
  absl::Status s = AuthorizeMethod(Id("reader"), M("Push"));
  EXPECT_EQ(s.message(), "reader may not call /ps.v1.ParameterServer/Push");
}

TEST(AuthorizeWorker, WorkersActOnlyAsThemselves) {
  const Identity w1 = Id("worker-1");
  EXPECT_TRUE(AuthorizeWorker(w1, "Push", 1).ok());
  absl::Status s = AuthorizeWorker(w1, "Push", 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "worker-1 may not call Push as worker 0");
  // Only worker 0 creates the parameters; others may wait for them.
  EXPECT_TRUE(AuthorizeWorker(w1, "InitParams", 1).ok());
  EXPECT_EQ(AuthorizeWorker(w1, "InitParams", 1, /*creates_parameters=*/true).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_TRUE(AuthorizeWorker(Id("worker-0"), "InitParams", 0, true).ok());
  EXPECT_EQ(AuthorizeWorker(w1, "InitParams", 0, true).code(),
            absl::StatusCode::kPermissionDenied);
  // Readers pull as any id; admins act as anyone.
  EXPECT_TRUE(AuthorizeWorker(Id("reader"), "Pull", 3).ok());
  EXPECT_TRUE(AuthorizeWorker(Id("reader"), "PullRows", 3).ok());
  EXPECT_FALSE(AuthorizeWorker(Id("reader"), "Push", 3).ok());
  EXPECT_FALSE(AuthorizeWorker(Id("reader"), "PushRows", 3).ok());
  EXPECT_FALSE(AuthorizeWorker(w1, "PushRows", 0).ok());
  EXPECT_TRUE(AuthorizeWorker(Id("admin"), "InitParams", 0, true).ok());
}

TEST(TokenTable, FindsTheIdentityOfAToken) {
  absl::StatusOr<TokenTable> t = TokenTable::Parse(
      "# tokens\nworker-0 aaaaaaaaaaaaaaaa0\n\nadmin   bbbbbbbbbbbbbbbb # ops\n", "test");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->size(), 2u);
  EXPECT_EQ(t->Find("aaaaaaaaaaaaaaaa0").value().name, "worker-0");
  EXPECT_EQ(t->Find("bbbbbbbbbbbbbbbb").value().name, "admin");
  for (absl::string_view bad : {"", "aaaaaaaaaaaaaaaa", "aaaaaaaaaaaaaaaa00", "bbbbbbbbbbbbbbbc"}) {
    EXPECT_EQ(t->Find(bad).status().code(), absl::StatusCode::kUnauthenticated) << bad;
  }
}

TEST(TokenTable, RejectsBadFiles) {
  for (absl::string_view text : {"", "# none\n", "worker-0\n", "worker-0 short\n",
                                 "root aaaaaaaaaaaaaaaa\n", "worker-0 a b\n",
                                 "worker-0 aaaaaaaaaaaaaaaa\nadmin aaaaaaaaaaaaaaaa\n"}) {
    EXPECT_EQ(TokenTable::Parse(text, "f").status().code(), absl::StatusCode::kInvalidArgument)
        << text;
  }
}

TEST(ConstantTimeEquals, ComparesContents) {
  EXPECT_TRUE(ConstantTimeEquals("", ""));
  EXPECT_TRUE(ConstantTimeEquals("abc", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "abd"));
  EXPECT_FALSE(ConstantTimeEquals("abc", "ab"));
  EXPECT_FALSE(ConstantTimeEquals("ab", "abc"));
  EXPECT_FALSE(ConstantTimeEquals("", "a"));
  EXPECT_FALSE(ConstantTimeEquals(std::string("a\0", 2), "a"));
}

}  // namespace
}  // namespace ps
