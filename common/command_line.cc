#include "common/command_line.h"

#include <string>

#include "absl/flags/parse.h"
#include "absl/flags/usage.h"
#include "absl/flags/usage_config.h"
#include "absl/strings/match.h"
#include "common/mutex_checks.h"

namespace ps {
namespace {

// Files of this project (Abseil's own flags, --flagfile and the like, stay
// under --helpfull).
bool OurFile(absl::string_view file) {
  for (absl::string_view dir : {"client/", "common/", "rpc/", "server/", "tests/", "tools/",
                                "worker/"}) {
    if (absl::StartsWith(file, dir)) return true;
  }
  return false;
}

}  // namespace

std::vector<char*> ParseCommandLine(int argc, char** argv, absl::string_view usage) {
  SkipMutexDeadlockDetection();
  absl::SetProgramUsageMessage(usage);
  absl::FlagsUsageConfig config;
  config.contains_help_flags = OurFile;
  config.contains_helpshort_flags = OurFile;
  absl::SetFlagsUsageConfig(config);
  return absl::ParseCommandLine(argc, argv);
}

}  // namespace ps
