// ps_ctl's commands (status, health, checkpoint, top, members) and the
// options they run with, read from the command line by CtlOptionsFromFlags
// (ctl_flags.cc: --timeout here; --servers and the security flags from
// client/client_flags.h; --coordinator and --job from
// coord/coordinator_flags.h; top's own from top.h). With --coordinator and
// no --servers, the servers are the job's live members in etcd. Each command prints to
// stdout and returns ps_ctl's exit status. Not thread-safe: main runs one.
#ifndef PS_TOOLS_CTL_COMMANDS_H_
#define PS_TOOLS_CTL_COMMANDS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "coord/coordinator_flags.h"
#include "tools/ctl/top.h"

namespace ps {

enum class CtlCommand { kStatus, kHealth, kCheckpoint, kTop, kMembers };

struct CtlOptions {
  CtlCommand command = CtlCommand::kStatus;
  std::vector<std::string> servers;            // HOST:PORT or unix:PATH, shard order
  absl::Duration timeout = absl::Seconds(10);  // per server: status, health, checkpoint
  SecurityOptions security;                    // of the channels
  TopOptions top;                              // kTop only
  CoordinatorFlags coordinator;                // address empty: none
};

// The command named by args[1] (args as ps::ParseCommandLine returns them)
// and the flags. INVALID_ARGUMENT naming the problem: no command, an unknown
// one or extra arguments (the message is then the usage line), neither
// --servers nor --coordinator (members: no --coordinator), a --timeout that is NaN, top's
// --interval or --iterations out of range.
absl::StatusOr<CtlOptions> CtlOptionsFromFlags(const std::vector<char*>& args);

// Runs the command. Exit status: 0 on success (health: every server
// SERVING); 1 when a server or etcd fails, does not answer or refuses the
// caller; 2 when the channels cannot be made from the options.
int RunCtl(const CtlOptions& options);

}  // namespace ps

#endif  // PS_TOOLS_CTL_COMMANDS_H_
