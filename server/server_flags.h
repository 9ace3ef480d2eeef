// ps_server's flags, defined here once (the shared security flags come from
// common/security_flags.h), and ServerOptionsFromFlags, which turns them
// into the ServerOptions of server/ps_server.h.
//
// Converting is all it does: what the values may be is checked by the
// options types, once: ServerOptions::Validate, ShardOptions' checks in
// Shard::Create, CheckSecurityOptions (rpc/credentials.h); PsServer::Start
// runs them all.
#ifndef PS_SERVER_SERVER_FLAGS_H_
#define PS_SERVER_SERVER_FLAGS_H_

#include "absl/status/statusor.h"
#include "server/ps_server.h"

namespace ps {

// The flags' values (after absl::ParseCommandLine). INVALID_ARGUMENT only
// for what cannot be converted: an unknown --mode or --staleness_lr, and
// --staleness given with a mode other than ssp.
absl::StatusOr<ServerOptions> ServerOptionsFromFlags();

}  // namespace ps

#endif  // PS_SERVER_SERVER_FLAGS_H_
