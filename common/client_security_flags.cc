#include "common/client_security_flags.h"

#include <string>

#include "absl/flags/flag.h"
#include "common/security_flags.h"

ABSL_FLAG(std::string, tls_server_name, "",
          "The name the servers' certificates carry, when the addresses in --servers are not "
          "it (e.g. IP addresses).");

namespace ps {

SecurityOptions ClientSecurityFromFlags() {
  SecurityOptions o = SecurityOptionsFromFlags();
  o.tls_server_name = absl::GetFlag(FLAGS_tls_server_name);
  return o;
}

}  // namespace ps
