// The security flags every process of the system shares, defined here once:
// --tls_cert, --tls_key, --tls_ca, --auth_token_file and --insecure
// (ps_server, ps_worker, ps_ctl, the tests' auth_probe). Linking this
// library adds them to a binary; the help text of each says what it means
// for a server and for a client. Client-only and server-only security flags
// live with their concern (client/client_flags.h: --tls_server_name;
// server/server_flags.h: --tls_reload_secs).
//
// Whether a combination makes sense depends on the role and the address, so
// it is checked where credentials are made (CheckSecurityOptions in
// rpc/credentials.h), once.
#ifndef PS_COMMON_SECURITY_FLAGS_H_
#define PS_COMMON_SECURITY_FLAGS_H_

#include "common/security_options.h"

namespace ps {

// The flags' values (after absl::ParseCommandLine); reload_interval and
// tls_server_name keep their defaults. Cannot fail.
SecurityOptions SecurityOptionsFromFlags();

}  // namespace ps

#endif  // PS_COMMON_SECURITY_FLAGS_H_
