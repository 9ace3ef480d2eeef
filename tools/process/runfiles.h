// Finding a file of this workspace that a tool runs at run time (ps_server
// and ps_worker beside ps_bench, a plotting script): in the Bazel runfiles,
// in bazel-bin, beside the executable (a deploy/bundle.sh bundle), or in the
// working directory. Stateless; thread-safe.
#ifndef PS_TOOLS_PROCESS_RUNFILES_H_
#define PS_TOOLS_PROCESS_RUNFILES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// The first readable one of RunfileCandidates(rel, this program's
// executable, $RUNFILES_DIR). NOT_FOUND naming `rel` and every place looked
// in when there is none.
absl::StatusOr<std::string> FindRunfile(absl::string_view rel);

// Where `rel` (a workspace path, "server/ps_server") may be, in order:
// RUNFILES_DIR/ps/REL (when `runfiles_dir` is not empty), EXE.runfiles/ps/REL,
// ANCESTOR/REL for each folder above the executable, nearest first (bazel-bin
// holds every package's binaries), EXE_DIR/BASENAME (a bundle's bin/ holds
// every binary), and REL itself (the working directory). Pure.
std::vector<std::string> RunfileCandidates(absl::string_view rel, absl::string_view exe,
                                           absl::string_view runfiles_dir);

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_RUNFILES_H_
