#include "client/client_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "absl/strings/str_split.h"
#include "common/client_security_flags.h"

ABSL_FLAG(std::string, servers, "",
          "Comma-separated HOST:PORT (or unix:/ABS/PATH, a unix socket on this host: plaintext "
          "without --insecure) of the parameter-server shards, in shard order (ps_worker "
          "needs every shard; ps_ctl queries those listed).");

namespace ps {

ClientOptions ClientOptionsFromFlags() {
  ClientOptions o;
  o.servers = absl::StrSplit(absl::GetFlag(FLAGS_servers), ',', absl::SkipWhitespace());
  o.security = ClientSecurityFromFlags();
  return o;
}

}  // namespace ps
