// CoordinatorAddress: where a cluster's coordinator is, from the
// --coordinator flag (ps_server, ps_worker, ps_ctl) or PS_COORDINATOR:
//   etcd://HOST:PORT[,HOST:PORT...]
// etcd (Debian's etcd-server 3.4) is the only coordinator; its endpoints are
// tried in order (coord/etcd_client.h). An empty flag means none: the
// cluster is fixed, as without this package.
//
// Pure: parsing only, thread-safe.
#ifndef PS_COORD_COORDINATOR_ADDRESS_H_
#define PS_COORD_COORDINATOR_ADDRESS_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

struct CoordinatorAddress {
  std::vector<std::string> endpoints;  // HOST:PORT, at least one
};

// INVALID_ARGUMENT naming the problem: another scheme, no endpoint, an
// endpoint without a port or with a port outside 1..65535.
absl::StatusOr<CoordinatorAddress> ParseCoordinatorAddress(absl::string_view flag);

}  // namespace ps

#endif  // PS_COORD_COORDINATOR_ADDRESS_H_
