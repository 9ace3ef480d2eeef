// The client's side of the security flags: those of common/security_flags.h
// plus --tls_server_name, which only a client has (ps_worker, ps_ctl, the
// tests' auth_probe). Its own library so that a binary gets exactly the
// flags it uses.
#ifndef PS_COMMON_CLIENT_SECURITY_FLAGS_H_
#define PS_COMMON_CLIENT_SECURITY_FLAGS_H_

#include "common/security_options.h"

namespace ps {

// SecurityOptionsFromFlags() with tls_server_name from --tls_server_name.
// Cannot fail (CheckSecurityOptions in rpc/credentials.h checks the whole
// when a channel is made).
SecurityOptions ClientSecurityFromFlags();

}  // namespace ps

#endif  // PS_COMMON_CLIENT_SECURITY_FLAGS_H_
