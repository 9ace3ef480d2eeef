// ps_ctl: operator tool for running parameter servers.
//
//   ps_ctl status --servers=h:p,h:p   one JSON object per shard, per line
//   ps_ctl health --servers=h:p,h:p   grpc.health.v1 check; exit 0 iff all SERVING
//   ps_ctl checkpoint --servers=h:p,...  each server writes a checkpoint now
//   ps_ctl top --servers=h:p,...   live view, every --interval (tools/ctl/top.h)
//   ps_ctl members --coordinator=etcd://h:p [--job=NAME]   the job's live members
// With --coordinator instead of --servers, the commands find the servers in
// etcd.
//
// The commands and their options: tools/ctl/commands.h. Exit status 2 for a
// bad command line.
#include <iostream>
#include <vector>

#include "common/command_line.h"
#include "tools/ctl/commands.h"

namespace {

constexpr char kUsage[] =
    "Operator tool for parameter servers.\n"
    "  ps_ctl status --servers=HOST:PORT,...   print each shard's status as JSON, one "
    "object per line\n"
    "  ps_ctl health --servers=HOST:PORT,...   gRPC health check of each server; exit 0 "
    "iff all are SERVING\n"
    "  ps_ctl checkpoint --servers=HOST:PORT,...   each server (run with --checkpoint_dir) "
    "writes a checkpoint now; prints one JSON object per shard\n"
    "  ps_ctl top --servers=HOST:PORT,... [--interval=1] [--iterations=0]   live view, "
    "polled every --interval seconds until Ctrl-C (or --iterations polls); redrawn in place "
    "on a terminal, else one block of plain lines per poll.\n"
    "    Per shard: SHARD SERVER MODE VERSION STEPS/S LIVE DROPPED WAITING (calls waiting "
    "for a version) PUSH_P50 PUSH_P99 PULL_P50 PULL_P99 (latency over the last interval, "
    "as the upper bound of the server's histogram bucket) IN_B/S OUT_B/S (tensor bytes "
    "received and sent per second); a shard that does not answer is DOWN with its error.\n"
    "    Per worker: WORKER STATE (live, dropped, seen) STEP (lowest over the shards) LAG "
    "(steps behind the newest worker). Needs the admin or reader identity.\n"
    "  ps_ctl members --coordinator=etcd://HOST:PORT [--job=NAME]   the job's live members "
    "registered in etcd (docs/elastic.md), one JSON object per line: role (servers, "
    "workers), id, value (a server's address); then the shard map: version, servers by "
    "shard (\"\" where none has published).\n"
    "  With --coordinator=etcd://HOST:PORT and no --servers, status, health, checkpoint and "
    "top find the servers in etcd.";

}  // namespace

int main(int argc, char** argv) {
  const std::vector<char*> args = ps::ParseCommandLine(argc, argv, kUsage);
  const absl::StatusOr<ps::CtlOptions> options = ps::CtlOptionsFromFlags(args);
  if (!options.ok()) {
    std::cerr << "ps_ctl: " << options.status().message() << std::endl;
    return 2;
  }
  return ps::RunCtl(*options);
}
