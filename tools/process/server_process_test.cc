// ServerProcess against the real ps_server (argv[1]) and against stand-in
// scripts that exit, hang, or write a port file late.
#include "tools/process/server_process.h"

#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "client/admin_client.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/process/cpu_affinity.h"
#include "tools/process/proc.h"

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;

const char* g_server = nullptr;

std::string TestDir() {
  const char* d = std::getenv("TEST_TMPDIR");
  return d != nullptr ? d : "/tmp";
}

// A stand-in "server": a shell script `body` that gets ps_server's
// arguments ($PORT_FILE is the --port_file value).
std::string Script(const std::string& name, const std::string& body) {
  const std::string path = absl::StrCat(TestDir(), "/", name, ".sh");
  std::ofstream(path) << "#!/bin/sh\n"
                      << "for a in \"$@\"; do case \"$a\" in --port_file=*) "
                         "PORT_FILE=\"${a#--port_file=}\";; esac; done\n"
                      << body << "\n";
  chmod(path.c_str(), 0755);
  return path;
}

ServerProcessOptions Options(const std::string& binary, const std::string& name) {
  ServerProcessOptions o;
  o.binary = binary;
  o.dir = TestDir();
  o.name = name;
  return o;
}

std::string Message(const absl::Status& s) { return std::string(s.message()); }

bool Gone(pid_t pid) { return kill(pid, 0) != 0 && errno == ESRCH; }

TEST(ServerProcess, StartsOnAFreePortAndServesWhenStartReturns) {
  ServerProcessOptions o = Options(g_server, "tcp");
  o.flags = {"--num_workers=2", "--mode=async"};
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_THAT((*s)->address(), StartsWith("127.0.0.1:"));
  int port = 0;
  EXPECT_TRUE(absl::SimpleAtoi((*s)->address().substr(10), &port) && port > 0) << (*s)->address();
  EXPECT_THAT((*s)->command_line(), HasSubstr("--listen=127.0.0.1:0 --port_file="));
  auto status = QueryStatus({(*s)->address()}, absl::Seconds(10));
  ASSERT_TRUE(status.ok()) << status.status();
  EXPECT_EQ((*status)[0].num_workers(), 2);
  // SIGTERM: a clean exit.
  const std::optional<int> st = (*s)->Stop();
  EXPECT_TRUE(st && WIFEXITED(*st) && WEXITSTATUS(*st) == 0) << DescribeExit(st);
}

TEST(ServerProcess, ServesOnAUnixSocket) {
  // Under /tmp: TEST_TMPDIR may be longer than a socket path can be.
  char dir[] = "/tmp/ps-server-process-XXXXXX";  // mode 0700
  ASSERT_NE(mkdtemp(dir), nullptr);
  ServerProcessOptions o = Options(g_server, "unix");
  o.listen = absl::StrCat("unix:", dir, "/shard-0.sock");
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->address(), o.listen);
  EXPECT_TRUE(QueryStatus({(*s)->address()}, absl::Seconds(10)).ok());
  s->reset();  // removes its socket
  EXPECT_EQ(rmdir(dir), 0) << std::strerror(errno);
}

TEST(ServerProcess, DestroyingItStopsTheServer) {
  auto s = ServerProcess::Start(Options(g_server, "destroyed"));
  ASSERT_TRUE(s.ok()) << s.status();
  const pid_t pid = (*s)->pid();
  EXPECT_FALSE(Gone(pid));
  s->reset();
  EXPECT_TRUE(Gone(pid));
}

TEST(ServerProcess, AppliesTheAddressSpaceLimitAndThePinning) {
  ServerProcessOptions o = Options(g_server, "limited");
  o.address_space = uint64_t{8} << 30;
  cpu_set_t cpu0;
  CPU_ZERO(&cpu0);
  CPU_SET(0, &cpu0);
  o.cpus = cpu0;
  cpu_set_t mine_before, mine_after;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine_before), &mine_before), 0);
  auto s = ServerProcess::Start(o);
  ASSERT_TRUE(s.ok()) << s.status();
  rlimit as{};
  ASSERT_EQ(prlimit((*s)->pid(), RLIMIT_AS, nullptr, &as), 0);
  EXPECT_EQ(as.rlim_cur, uint64_t{8} << 30);
  EXPECT_EQ(*ProcAllowedCpus((*s)->pid()), "0");
  // This thread's mask is untouched.
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine_after), &mine_after), 0);
  EXPECT_EQ(CpuListString(mine_after), CpuListString(mine_before));
}

TEST(ServerProcess, AFlagTheServerRefusesIsInvalidArgumentWithItsLine) {
  ServerProcessOptions o = Options(g_server, "refused");
  o.flags = {"--mode=bsp"};
  auto s = ServerProcess::Start(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_THAT(Message(s.status()), StartsWith("ps_server: "));
  EXPECT_THAT(Message(s.status()), HasSubstr("bsp"));
  o.flags = {"--no_such_flag=1"};
  s = ServerProcess::Start(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << s.status();
  EXPECT_THAT(Message(s.status()), HasSubstr("no_such_flag"));
}

TEST(ServerProcess, AnExitBeforeServingIsUnavailableAtOnceWithTheLogsTail) {
  const absl::Time start = absl::Now();
  auto s = ServerProcess::Start(
      Options(Script("exits", "echo cannot bind, giving up\nexit 3"), "exits"));
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_THAT(Message(s.status()), StartsWith("ps_server did not start (exit status 3): "));
  EXPECT_THAT(Message(s.status()), HasSubstr("cannot bind, giving up"));
  // The exit woke the wait: far sooner than start_timeout (30 s).
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
}

TEST(ServerProcess, NoPortFileByTheDeadlineIsDeadlineExceededAndStopsTheProcess) {
  const std::string pid_file = absl::StrCat(TestDir(), "/hangs.pid");
  ServerProcessOptions o =
      Options(Script("hangs", absl::StrCat("echo $$ > ", pid_file, "\nexec sleep 600")), "hangs");
  o.start_timeout = absl::Milliseconds(500);
  o.stop_grace = absl::Seconds(5);
  const absl::Time start = absl::Now();
  auto s = ServerProcess::Start(o);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kDeadlineExceeded) << s.status();
  EXPECT_THAT(Message(s.status()), HasSubstr("ps_server did not start: no port file within 500ms"));
  EXPECT_LT(absl::Now() - start, absl::Seconds(10));
  int pid = 0;
  std::ifstream(pid_file) >> pid;
  ASSERT_GT(pid, 0);
  EXPECT_TRUE(Gone(pid));
}

TEST(ServerProcess, APortFileRenamedIntoPlaceLaterIsSeen) {
  auto s =
      ServerProcess::Start(Options(Script("late",
                                          "sleep 0.3\necho 127.0.0.1:4321 > \"$PORT_FILE.tmp\"\n"
                                          "mv \"$PORT_FILE.tmp\" \"$PORT_FILE\"\nexec sleep 600"),
                                   "late"));
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ((*s)->address(), "127.0.0.1:4321");
}

TEST(ServerProcess, AStalePortFileIsNotTakenForANewOne) {
  std::ofstream(absl::StrCat(TestDir(), "/stale.port")) << "127.0.0.1:1\n";
  ServerProcessOptions o = Options(Script("stale", "exit 1"), "stale");
  EXPECT_EQ(ServerProcess::Start(o).status().code(), absl::StatusCode::kUnavailable);
}

TEST(ServerProcess, RefusesOptionsThatCannotWork) {
  EXPECT_EQ(ServerProcess::Start(Options("/no/such/ps_server", "x")).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(ServerProcess::Start(Options(g_server, "a/b")).status().code(),
            absl::StatusCode::kInvalidArgument);
  ServerProcessOptions o = Options(g_server, "x");
  o.start_timeout = absl::ZeroDuration();
  EXPECT_EQ(ServerProcess::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
  o = Options(g_server, "x");
  o.dir = "";
  EXPECT_EQ(ServerProcess::Start(o).status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace ps

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " PS_SERVER" << std::endl;
    return 2;
  }
  ps::g_server = argv[1];
  return RUN_ALL_TESTS();
}
