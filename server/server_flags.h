// ps_server's flags, defined here once (the shared security flags come from
// common/security_flags.h), and ServerOptionsFromFlags, which turns them
// into the ServerOptions of server/ps_server.h; --port_file, which ps_server
// writes once it serves (the one readiness signal its launchers wait for,
// tools/process/server_process.h); and the lines ps_server prints about
// what the flags made of it.
//
// Converting is all it does: what the values may be is checked by the
// options types, once: ServerOptions::Validate, ShardOptions' checks in
// Shard::Create, CheckSecurityOptions (rpc/credentials.h); PsServer::Start
// runs them all.
#ifndef PS_SERVER_SERVER_FLAGS_H_
#define PS_SERVER_SERVER_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "server/ps_server.h"

namespace ps {

// The flags' values (after absl::ParseCommandLine). INVALID_ARGUMENT only
// for what cannot be converted: an unknown --mode or --staleness_lr, and
// --staleness given with a mode other than ssp.
absl::StatusOr<ServerOptions> ServerOptionsFromFlags();

// --port_file: where to write the address served on; "" = nowhere.
std::string PortFileFromFlags();

// Writes `address` and a newline to PATH.tmp, then renames it to `path`, so
// a reader sees the whole line or no file. INTERNAL naming --port_file when
// it cannot.
absl::Status WritePortFile(const std::string& path, const std::string& address);

// What a server started with `options` runs with, as ps_server prints it,
// in this order, each line without its newline. `address`, `health_address`
// and `metrics_address` are the server's (the last two "" when not served).
// Pure but for this process's uid in `access`.
struct ServerDescription {
  std::string config;    // stdout: position, mode, workers, optimizer, the mode's rules
  std::string access;    // stdout: who may connect to a plaintext unix socket; "" otherwise
  std::string warning;   // stderr: security that is not as it should be; "" otherwise
  std::string security;  // stdout: transport security and the extra ports
};
ServerDescription DescribeServer(const ServerOptions& options, const std::string& address,
                                 const std::string& health_address,
                                 const std::string& metrics_address);

}  // namespace ps

#endif  // PS_SERVER_SERVER_FLAGS_H_
