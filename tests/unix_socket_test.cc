// Servers on unix sockets (rpc/unix_socket.h, rpc/credentials.h): the
// address forms, the folder rule (0700, this user's) that stands in for TLS,
// a stale socket file replaced but a live one never stolen, the file removed
// at shutdown, and bearer tokens over a unix socket giving identities and
// roles. Push and pull over both transports on a unix socket are in
// transport_conformance_test.cc.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstring>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "rpc/credentials.h"
#include "rpc/unix_socket.h"
#include "tests/test_cluster.h"
#include "tests/unix_socket_dir.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

const ModelSpec kSpec = {{"w", {4}}};

bool Exists(const std::string& path) {
  struct stat st;
  return lstat(path.c_str(), &st) == 0;
}

// A socket file at `path` whose process is gone: bound, never listened on,
// closed (connect() to it is refused).
void MakeStaleSocket(const std::string& path) {
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::strncpy(addr.sun_path, path.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)), 0)
      << std::strerror(errno);
  close(fd);
}

ServerOptions OneShard(const std::string& listen) {
  ServerOptions o;
  o.listen = listen;
  o.shard.num_workers = 1;
  o.shard.optimizer.learning_rate = 0.5f;
  return o;
}

ClientOptions WorkerOn(const std::string& address) {
  ClientOptions c;
  c.servers = {address};
  c.worker_id = 0;
  c.num_workers = 1;
  c.connect_timeout = absl::Seconds(10);
  c.rpc_timeout = absl::Seconds(10);
  return c;
}

TEST(UnixSocketPath, TakesAbsolutePathsOnly) {
  EXPECT_EQ(*UnixSocketPath("unix:/run/ps/s0.sock", "--listen"), "/run/ps/s0.sock");
  EXPECT_EQ(*UnixSocketPath("unix:///run/ps/s0.sock", "--listen"), "/run/ps/s0.sock");
  for (const char* bad : {"unix:s0.sock", "unix:", "unix:/run/ps/", "unix://host/s0.sock"}) {
    absl::StatusOr<std::string> p = UnixSocketPath(bad, "--listen");
    EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_THAT(p.status().message(), HasSubstr("--listen")) << bad;
  }
  absl::StatusOr<std::string> long_path =
      UnixSocketPath("unix:/" + std::string(120, 'x'), "--servers");
  EXPECT_THAT(long_path.status().message(), HasSubstr("at most 107")) << long_path.status();
}

TEST(CheckSecurityOptions, UnixSocketNeedsNoTlsAndTakesTokens) {
  UnixSocketDir dir;
  SecurityOptions plain;
  EXPECT_TRUE(CheckSecurityOptions(plain, dir.Address("s.sock"), /*server=*/true).ok());
  EXPECT_TRUE(CheckSecurityOptions(plain, dir.Address("s.sock"), /*server=*/false).ok());
  SecurityOptions tokens;
  tokens.auth_token_file = "/dev/null";
  EXPECT_TRUE(CheckSecurityOptions(tokens, dir.Address("s.sock"), /*server=*/true).ok());
  EXPECT_TRUE(CheckSecurityOptions(tokens, dir.Address("s.sock"), /*server=*/false).ok());
  // Over TCP tokens still need TLS.
  EXPECT_THAT(CheckSecurityOptions(tokens, "127.0.0.1:1", true).message(),
              HasSubstr("needs TLS"));
}

TEST(UnixSocketServer, RefusesAFolderOthersCanEnter) {
  UnixSocketDir dir;
  ASSERT_EQ(chmod(dir.folder().c_str(), 0755), 0);
  absl::StatusOr<std::unique_ptr<PsServer>> s = PsServer::Start(OneShard(dir.Address("s.sock")));
  ASSERT_FALSE(s.ok());
  EXPECT_EQ(s.status().code(), absl::StatusCode::kFailedPrecondition) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("--listen")) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("mode 0755")) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr(dir.via())) << s.status();
  EXPECT_FALSE(Exists(dir.Path("s.sock")));
}

TEST(UnixSocketServer, RefusesAMissingFolder) {
  UnixSocketDir dir;
  const std::string address = dir.Address("missing/s.sock");
  absl::StatusOr<std::unique_ptr<PsServer>> s = PsServer::Start(OneShard(address));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("--listen")) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr(dir.Path("missing"))) << s.status();
  EXPECT_THAT(s.status().message(), HasSubstr("mkdir -m 0700")) << s.status();
}

TEST(UnixSocketServer, ServesAndRemovesItsSocketAtShutdown) {
  UnixSocketDir dir;
  const std::string address = dir.Address("s.sock");
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(OneShard(address));
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ((*server)->address(), address);
  EXPECT_TRUE(Exists(dir.Path("s.sock")));
  {
    absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(WorkerOn(address));
    ASSERT_TRUE(c.ok()) << c.status();
    const TensorList init = {{1, 2, 3, 4}};
    ASSERT_TRUE((*c)->Init(kSpec, &init).ok());
    TensorList weights;
    ASSERT_TRUE((*c)->PushPull({{2, 2, 2, 2}}, &weights).ok());
    EXPECT_EQ(weights, (TensorList{{0, 1, 2, 3}}));
  }
  ASSERT_TRUE((*server)->Shutdown().ok());
  EXPECT_FALSE(Exists(dir.Path("s.sock")));
}

TEST(UnixSocketServer, ReplacesAStaleSocket) {
  UnixSocketDir dir;
  MakeStaleSocket(dir.Path("s.sock"));
  ASSERT_TRUE(Exists(dir.Path("s.sock")));
  auto mu = std::make_shared<absl::Mutex>();
  auto lines = std::make_shared<std::vector<std::string>>();
  ServerOptions o = OneShard(dir.Address("s.sock"));
  o.shard.log = [mu, lines](absl::string_view line) {
    absl::MutexLock l(mu.get());
    lines->emplace_back(line);
  };
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(o);
  ASSERT_TRUE(server.ok()) << server.status();
  {
    absl::MutexLock l(mu.get());
    EXPECT_THAT(*lines, testing::Contains(HasSubstr("removed the stale socket")));
  }
  absl::StatusOr<std::unique_ptr<PsClient>> c =
      PsClient::Connect(WorkerOn((*server)->address()));
  ASSERT_TRUE(c.ok()) << c.status();
  const TensorList init = {{1, 2, 3, 4}};
  EXPECT_TRUE((*c)->Init(kSpec, &init).ok());
}

TEST(UnixSocketServer, NeverStealsALiveSocket) {
  UnixSocketDir dir;
  const std::string address = dir.Address("s.sock");
  absl::StatusOr<std::unique_ptr<PsServer>> first = PsServer::Start(OneShard(address));
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<std::unique_ptr<PsServer>> second = PsServer::Start(OneShard(address));
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kUnavailable) << second.status();
  EXPECT_THAT(second.status().message(), HasSubstr("address in use")) << second.status();
  // The first still serves on its socket.
  absl::StatusOr<std::unique_ptr<PsClient>> c = PsClient::Connect(WorkerOn(address));
  ASSERT_TRUE(c.ok()) << c.status();
  const TensorList init = {{1, 2, 3, 4}};
  EXPECT_TRUE((*c)->Init(kSpec, &init).ok());
}

TEST(UnixSocketServer, RefusesAFileThatIsNotASocket) {
  UnixSocketDir dir;
  std::ofstream(dir.Path("s.sock")) << "data\n";
  absl::StatusOr<std::unique_ptr<PsServer>> s = PsServer::Start(OneShard(dir.Address("s.sock")));
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("not a socket")) << s.status();
  EXPECT_TRUE(Exists(dir.Path("s.sock")));
}

// Bearer tokens over a unix socket, without TLS.
class UnixSocketTokens : public ::testing::Test {
 protected:
  void SetUp() override {
    tokens_ = dir_.folder() + "/tokens.txt";
    std::ofstream(tokens_) << "worker-0 " << kWorker0 << "\nreader " << kReader << "\n";
    ServerOptions o = OneShard(dir_.Address("s.sock"));
    o.security.auth_token_file = tokens_;
    absl::StatusOr<std::unique_ptr<PsServer>> s = PsServer::Start(o);
    ASSERT_TRUE(s.ok()) << s.status();
    server_ = *std::move(s);
  }

  // Worker 0's client presenting `token` (none when empty).
  absl::StatusOr<std::unique_ptr<PsClient>> ConnectWith(const std::string& token) {
    ClientOptions c = WorkerOn(server_->address());
    if (!token.empty()) {
      c.security.auth_token_file = dir_.folder() + "/client-" + token.substr(0, 4) + ".token";
      std::ofstream(c.security.auth_token_file) << token << "\n";
    }
    return PsClient::Connect(c);
  }

  static constexpr const char* kWorker0 = "w0w0w0w0w0w0w0w0w0w0w0w0";
  static constexpr const char* kReader = "rdrdrdrdrdrdrdrdrdrdrdrd";
  UnixSocketDir dir_;
  std::string tokens_;
  std::unique_ptr<PsServer> server_;
};

TEST_F(UnixSocketTokens, WorkersTokenActsAsThatWorker) {
  absl::StatusOr<std::unique_ptr<PsClient>> c = ConnectWith(kWorker0);
  ASSERT_TRUE(c.ok()) << c.status();
  const TensorList init = {{1, 2, 3, 4}};
  ASSERT_TRUE((*c)->Init(kSpec, &init).ok());
  TensorList weights;
  EXPECT_TRUE((*c)->PushPull({{2, 2, 2, 2}}, &weights).ok());
  EXPECT_EQ(weights, (TensorList{{0, 1, 2, 3}}));
}

TEST_F(UnixSocketTokens, ReadersTokenMayNotPush) {
  absl::StatusOr<std::unique_ptr<PsClient>> worker = ConnectWith(kWorker0);
  ASSERT_TRUE(worker.ok()) << worker.status();
  const TensorList init = {{1, 2, 3, 4}};
  ASSERT_TRUE((*worker)->Init(kSpec, &init).ok());
  absl::StatusOr<std::unique_ptr<PsClient>> c = ConnectWith(kReader);
  absl::Status s = c.ok() ? (*c)->Init(kSpec, nullptr) : c.status();
  if (s.ok()) {
    TensorList weights;
    s = (*c)->PushPull({{2, 2, 2, 2}}, &weights);
  }
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied) << s;
  EXPECT_THAT(s.message(), HasSubstr("reader")) << s;
}

TEST_F(UnixSocketTokens, WrongOrMissingTokenIsUnauthenticated) {
  for (const std::string& token : {std::string("xxxxxxxxxxxxxxxxxxxxxxxx"), std::string()}) {
    SCOPED_TRACE(token.empty() ? "no token" : "wrong token");
    absl::StatusOr<std::unique_ptr<PsClient>> c = ConnectWith(token);
    const TensorList init = {{1, 2, 3, 4}};
    absl::Status s = c.ok() ? (*c)->Init(kSpec, &init) : c.status();
    EXPECT_EQ(s.code(), absl::StatusCode::kUnauthenticated) << s;
  }
}

}  // namespace
}  // namespace ps
