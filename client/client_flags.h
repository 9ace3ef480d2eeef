// --servers, the flag every client of the servers has (ps_worker, ps_ctl),
// defined here once, and ClientOptionsFromFlags, which reads it with the
// client's security flags (common/client_security_flags.h). How long a
// client waits and how it travels (ps_worker's --connect_timeout,
// --transport, ...) are the worker's flags (worker/worker_flags.h).
#ifndef PS_CLIENT_CLIENT_FLAGS_H_
#define PS_CLIENT_CLIENT_FLAGS_H_

#include "client/client_options.h"

namespace ps {

// servers (--servers split at commas, blanks dropped; empty when unset: the
// caller says what that means) and security (ClientSecurityFromFlags); the
// other fields keep their defaults. Cannot fail: ValidateClientOptions
// checks the whole once the caller has filled it.
ClientOptions ClientOptionsFromFlags();

}  // namespace ps

#endif  // PS_CLIENT_CLIENT_FLAGS_H_
