#include "tools/process/proc.h"

#include <sched.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstring>
#include <thread>
#include <vector>

#include "absl/strings/match.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tools/process/cpu_affinity.h"

namespace ps {
namespace {

using ::testing::HasSubstr;

TEST(StatusFieldFromText, ReturnsTheNamedFieldTrimmed) {
  const char* text =
      "Name:\tproc_test\nVmHWM:\t    2048 kB\nVmRSS:\t    1024 kB\n"
      "Cpus_allowed_list:\t0-1\n";
  EXPECT_EQ(*StatusFieldFromText(text, "VmRSS"), "1024 kB");
  EXPECT_EQ(*StatusFieldFromText(text, "Cpus_allowed_list"), "0-1");
  // A name is matched whole, never as the prefix of a longer one.
  EXPECT_EQ(StatusFieldFromText(text, "Vm").status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(StatusFieldFromText(text, "VmSwap").status().message()),
              HasSubstr("VmSwap"));
}

TEST(KilobytesFromText, ConvertsKilobytesAndRefusesAnythingElse) {
  EXPECT_EQ(*KilobytesFromText("1024 kB"), 1 << 20);
  EXPECT_EQ(*KilobytesFromText("  0 kB "), 0);
  for (const char* bad : {"1024", "kB", "x kB", "-1 kB", "99999999999999999999 kB"}) {
    EXPECT_EQ(KilobytesFromText(bad).status().code(), absl::StatusCode::kDataLoss) << bad;
  }
}

TEST(CpuTicksFromStatText, CountsFieldsFromTheCommandsLastParenthesis) {
  // A command with spaces and parentheses of its own; utime 7, stime 5.
  const char* text = "4242 (a) b (c) S 1 4242 4242 0 -1 4194560 100 0 0 0 7 5 0 0 20 0 1 0 9\n";
  EXPECT_EQ(*CpuTicksFromStatText(text), 12);
  EXPECT_EQ(CpuTicksFromStatText("4242 S 1 2 3").status().code(), absl::StatusCode::kDataLoss);
  EXPECT_EQ(CpuTicksFromStatText("4242 (x) S 1 2 3").status().code(), absl::StatusCode::kDataLoss);
}

TEST(ProcStatusBytes, SeesThisProcessGrow) {
  const int64_t before = *ProcStatusBytes(getpid(), "VmRSS");
  std::vector<char> block(64 << 20);
  std::memset(block.data(), 1, block.size());  // touch every page
  const int64_t after = *ProcStatusBytes(getpid(), "VmRSS");
  EXPECT_GE(after - before, int64_t{48} << 20) << before << " -> " << after;
  EXPECT_GE(*ProcStatusBytes(getpid(), "VmHWM"), after);
  EXPECT_EQ(block[12345], 1);
}

TEST(ProcStatusBytes, NamesTheFileAndFieldItCannotRead) {
  absl::StatusOr<int64_t> missing = ProcStatusBytes(getpid(), "NoSuchField");
  EXPECT_EQ(missing.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/status"));
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("NoSuchField"));
  // Not a memory field.
  EXPECT_EQ(ProcStatusBytes(getpid(), "Name").status().code(), absl::StatusCode::kDataLoss);
}

TEST(Proc, AProcessThatIsGoneIsNotFound) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) _exit(0);
  ASSERT_EQ(waitpid(child, nullptr, 0), child);
  EXPECT_EQ(ProcCpuTime(child).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ProcStatusBytes(child, "VmRSS").status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(ProcThreadCount(child).status().code(), absl::StatusCode::kNotFound);
}

// The CPU time getrusage reports for this process.
absl::Duration RusageCpu() {
  rusage u{};
  getrusage(RUSAGE_SELF, &u);
  return absl::DurationFromTimeval(u.ru_utime) + absl::DurationFromTimeval(u.ru_stime);
}

TEST(ProcCpuTime, AgreesWithGetrusageAsThisProcessSpendsCpu) {
  const absl::Duration rusage_before = RusageCpu();
  const absl::Duration proc_before = *ProcCpuTime(getpid());
  // Spend 300 ms of CPU (however long that takes on a busy machine).
  volatile uint64_t x = 0;
  const absl::Time give_up = absl::Now() + absl::Seconds(20);
  while (RusageCpu() - rusage_before < absl::Milliseconds(300) && absl::Now() < give_up) {
    for (int i = 0; i < 100000; ++i) x = x + 1;
  }
  const absl::Duration proc = *ProcCpuTime(getpid()) - proc_before;
  const absl::Duration rusage = RusageCpu() - rusage_before;
  ASSERT_GE(rusage, absl::Milliseconds(300));
  // Equal within the clock tick's resolution (usually 10 ms) at each end.
  EXPECT_LE(absl::AbsDuration(proc - rusage), absl::Milliseconds(40))
      << "/proc " << proc << ", getrusage " << rusage;
}

TEST(ProcThreadCount, CountsAThreadWhileItRuns) {
  const int before = *ProcThreadCount(getpid());
  EXPECT_GE(before, 1);
  absl::Notification done;
  std::thread t([&] { done.WaitForNotification(); });
  EXPECT_EQ(*ProcThreadCount(getpid()), before + 1);
  done.Notify();
  t.join();
  EXPECT_EQ(*ProcThreadCount(getpid()), before);
}

TEST(ProcAllowedCpus, IsTheKernelsListOfThisProcesssMask) {
  cpu_set_t mine;
  ASSERT_EQ(sched_getaffinity(0, sizeof(mine), &mine), 0);
  EXPECT_EQ(*ProcAllowedCpus(getpid()), CpuListString(mine));
}

TEST(SysctlInt, ReadsAnIntegerSettingByItsDottedName) {
  absl::StatusOr<int64_t> pid_max = SysctlInt("kernel.pid_max");
  ASSERT_TRUE(pid_max.ok()) << pid_max.status();
  EXPECT_GT(*pid_max, getpid());
  EXPECT_EQ(SysctlInt("kernel.no_such_setting").status().code(), absl::StatusCode::kNotFound);
  // A text setting is no integer.
  EXPECT_EQ(SysctlInt("kernel.ostype").status().code(), absl::StatusCode::kDataLoss);
}

TEST(SysctlInt, RefusesNamesThatLeaveProcSys) {
  for (const char* bad : {"", "kernel..pid_max", "../self/status", "kernel/pid_max", ".kernel"}) {
    EXPECT_EQ(SysctlInt(bad).status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
}

TEST(SelfExecutable, IsThisTestsBinary) {
  absl::StatusOr<std::string> exe = SelfExecutable();
  ASSERT_TRUE(exe.ok()) << exe.status();
  EXPECT_TRUE(absl::EndsWith(*exe, "/proc_test")) << *exe;
  EXPECT_EQ(access(exe->c_str(), X_OK), 0) << *exe;
}

}  // namespace
}  // namespace ps
