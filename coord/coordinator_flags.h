// The coordinator flags every process of an elastic cluster shares, defined
// here once (ps_server, ps_worker, ps_ctl; linking this library adds them):
//   --coordinator=etcd://HOST:PORT[,HOST:PORT...]  (empty: none, the default)
//   --job=NAME             the cluster's keys in etcd: /ps/NAME/ (default)
//   --coordinator_ttl=SECS how long a member that stopped answering stays
//                          listed (its etcd lease), >= 2
// See docs/elastic.md.
#ifndef PS_COORD_COORDINATOR_FLAGS_H_
#define PS_COORD_COORDINATOR_FLAGS_H_

#include <string>

#include "absl/status/statusor.h"
#include "coord/registration.h"

namespace ps {

struct CoordinatorFlags {
  std::string address;               // as --coordinator: empty, or a checked etcd:// address
  RegistrationOptions registration;  // job and ttl; log unset
};

// The flags' values (after absl::ParseCommandLine); INVALID_ARGUMENT naming
// the flag for a bad address, job or ttl.
absl::StatusOr<CoordinatorFlags> CoordinatorFromFlags();

}  // namespace ps

#endif  // PS_COORD_COORDINATOR_FLAGS_H_
