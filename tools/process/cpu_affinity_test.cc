#include "tools/process/cpu_affinity.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

TEST(CpuList, ParsesNumbersAndRanges) {
  absl::StatusOr<cpu_set_t> set = ParseCpuList("0,2-4,7", "server_cpus");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(CPU_COUNT(&*set), 5);
  EXPECT_TRUE(CPU_ISSET(0, &*set) && CPU_ISSET(3, &*set) && CPU_ISSET(7, &*set));
  EXPECT_FALSE(CPU_ISSET(1, &*set));
  EXPECT_EQ(CpuListString(*set), "0,2-4,7");
}

TEST(CpuList, RejectsBadTextNamingTheFlag) {
  for (const char* bad : {"", "x", "3-1", "-1", "0,", "1-2-3", "99999"}) {
    absl::StatusOr<cpu_set_t> set = ParseCpuList(bad, "client_cpus");
    ASSERT_FALSE(set.ok()) << bad;
    EXPECT_EQ(set.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(set.status().message().find("--client_cpus"), absl::string_view::npos);
  }
}

TEST(PinCallingThread, KeepsTheThreadOnAnAllowedCpu) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  cpu_set_t one;
  CPU_ZERO(&one);
  for (int c = 0; c < CPU_SETSIZE; ++c) {
    if (CPU_ISSET(c, &mine)) {
      CPU_SET(c, &one);
      break;
    }
  }
  ASSERT_TRUE(PinCallingThread(one, "client_cpus").ok());
  cpu_set_t now;
  ASSERT_EQ(sched_getaffinity(0, sizeof(now), &now), 0);
  EXPECT_TRUE(CPU_EQUAL(&now, &one));
}

}  // namespace
}  // namespace ps
