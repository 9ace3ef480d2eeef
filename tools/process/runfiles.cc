#include "tools/process/runfiles.h"

#include <unistd.h>

#include <cstdlib>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "tools/process/proc.h"

namespace ps {

// The workspace's name (WORKSPACE), under which the runfiles tree holds it.
constexpr char kWorkspace[] = "ps";

std::vector<std::string> RunfileCandidates(absl::string_view rel, absl::string_view exe,
                                           absl::string_view runfiles_dir) {
  std::vector<std::string> out;
  if (!runfiles_dir.empty()) out.push_back(absl::StrCat(runfiles_dir, "/", kWorkspace, "/", rel));
  if (!exe.empty()) {
    out.push_back(absl::StrCat(exe, ".runfiles/", kWorkspace, "/", rel));
    const absl::string_view exe_dir = exe.substr(0, exe.rfind('/'));
    for (absl::string_view dir = exe_dir; !dir.empty(); dir = dir.substr(0, dir.rfind('/'))) {
      out.push_back(absl::StrCat(dir, "/", rel));
      if (dir.find('/') == absl::string_view::npos) break;
    }
    const size_t slash = rel.rfind('/');
    out.push_back(
        absl::StrCat(exe_dir, "/", slash == absl::string_view::npos ? rel : rel.substr(slash + 1)));
  }
  out.push_back(std::string(rel));
  return out;
}

absl::StatusOr<std::string> FindRunfile(absl::string_view rel) {
  const char* runfiles_dir = std::getenv("RUNFILES_DIR");
  const absl::StatusOr<std::string> exe = SelfExecutable();
  const std::vector<std::string> candidates =
      RunfileCandidates(rel, exe.ok() ? *exe : "", runfiles_dir != nullptr ? runfiles_dir : "");
  for (const std::string& c : candidates) {
    if (access(c.c_str(), R_OK) == 0) return c;
  }
  return absl::NotFoundError(
      absl::StrCat("cannot find ", rel, "; looked in ", absl::StrJoin(candidates, ", ")));
}

}  // namespace ps
