// ps_ctl's own flag (--timeout) and CtlOptionsFromFlags (commands.h).
#include <string>

#include "absl/flags/flag.h"
#include "client/client_flags.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "tools/ctl/commands.h"

ABSL_FLAG(double, timeout, 10, "Seconds to wait for each server.");

namespace ps {

absl::StatusOr<CtlOptions> CtlOptionsFromFlags(const std::vector<char*>& args) {
  const std::string cmd = args.size() == 2 ? args[1] : "";
  CtlOptions o;
  if (cmd == "status") {
    o.command = CtlCommand::kStatus;
  } else if (cmd == "health") {
    o.command = CtlCommand::kHealth;
  } else if (cmd == "checkpoint") {
    o.command = CtlCommand::kCheckpoint;
  } else if (cmd == "top") {
    o.command = CtlCommand::kTop;
  } else if (cmd == "members") {
    o.command = CtlCommand::kMembers;
  } else {
    return absl::InvalidArgumentError(
        "usage: ps_ctl status|health|checkpoint|top --servers=HOST:PORT,... or "
        "--coordinator=etcd://HOST:PORT; ps_ctl members --coordinator=etcd://HOST:PORT (see "
        "--help)");
  }
  const ClientOptions client = ClientOptionsFromFlags();
  o.servers = client.servers;
  o.security = client.security;
  ASSIGN_OR_RETURN(o.coordinator, CoordinatorFromFlags());
  if (o.command == CtlCommand::kMembers && o.coordinator.address.empty()) {
    return absl::InvalidArgumentError("members needs --coordinator=etcd://HOST:PORT");
  }
  if (o.servers.empty() && o.coordinator.address.empty()) {
    return absl::InvalidArgumentError("--servers is empty (and no --coordinator to list them)");
  }
  ASSIGN_OR_RETURN(o.timeout, SecondsFromFlag("timeout", absl::GetFlag(FLAGS_timeout)));
  if (o.command == CtlCommand::kTop) {
    ASSIGN_OR_RETURN(o.top, TopOptionsFromFlags());
  }
  return o;
}

}  // namespace ps
