#include "tools/process/runfiles.h"

#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace ps {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(RunfileCandidates, RunfilesThenEveryFolderAboveTheBinaryThenBesideItThenHere) {
  EXPECT_THAT(RunfileCandidates("server/ps_server", "/w/bazel-bin/tools/bench/ps_bench", "/r"),
              ElementsAre("/r/ps/server/ps_server",
                          "/w/bazel-bin/tools/bench/ps_bench.runfiles/ps/server/ps_server",
                          "/w/bazel-bin/tools/bench/server/ps_server",
                          "/w/bazel-bin/tools/server/ps_server",  //
                          "/w/bazel-bin/server/ps_server",        // bazel-bin
                          "/w/server/ps_server",
                          "/w/bazel-bin/tools/bench/ps_server",  // a bundle's bin/
                          "server/ps_server"));
}

TEST(RunfileCandidates, WithoutRunfilesDirOrExecutable) {
  EXPECT_THAT(RunfileCandidates("tools/x.py", "/bin/ps_bench", ""),
              ElementsAre("/bin/ps_bench.runfiles/ps/tools/x.py", "/bin/tools/x.py", "/bin/x.py",
                          "tools/x.py"));
  EXPECT_THAT(RunfileCandidates("tools/x.py", "", ""), ElementsAre("tools/x.py"));
}

TEST(FindRunfile, FindsADataFileOfThisTest) {
  absl::StatusOr<std::string> path = FindRunfile("tools/process/runfiles_test_data.txt");
  ASSERT_TRUE(path.ok()) << path.status();
  std::ifstream in(*path);
  std::string line;
  ASSERT_TRUE(std::getline(in, line)) << *path;
  EXPECT_EQ(line, "found");
}

TEST(FindRunfile, NamesTheFileAndWhereItLookedWhenMissing) {
  absl::StatusOr<std::string> path = FindRunfile("no/such/file");
  EXPECT_EQ(path.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(path.status().message()),
              HasSubstr("cannot find no/such/file; looked in "));
  EXPECT_THAT(std::string(path.status().message()), HasSubstr(".runfiles/ps/no/such/file"));
}

}  // namespace
}  // namespace ps
