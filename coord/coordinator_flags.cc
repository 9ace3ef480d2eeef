#include "coord/coordinator_flags.h"

#include "absl/flags/flag.h"
#include "absl/strings/str_cat.h"
#include "common/flag_lists.h"
#include "common/status_macros.h"
#include "coord/coordinator_address.h"

ABSL_FLAG(std::string, coordinator, "",
          "etcd://HOST:PORT[,HOST:PORT...]: the etcd of an elastic cluster, where servers and "
          "workers register (docs/elastic.md); empty: none, a fixed cluster.");
ABSL_FLAG(std::string, job, "default",
          "With --coordinator: the cluster's name, its keys' prefix in etcd (/ps/JOB/).");
ABSL_FLAG(double, coordinator_ttl, 10,
          "With --coordinator: seconds a member that stopped answering stays registered (its "
          "etcd lease, renewed every third of it); at least 2.");

namespace ps {

absl::StatusOr<CoordinatorFlags> CoordinatorFromFlags() {
  CoordinatorFlags f;
  f.address = absl::GetFlag(FLAGS_coordinator);
  f.registration.job = absl::GetFlag(FLAGS_job);
  ASSIGN_OR_RETURN(f.registration.ttl,
                   SecondsFromFlag("coordinator_ttl", absl::GetFlag(FLAGS_coordinator_ttl)));
  if (f.registration.ttl < absl::Seconds(2) || f.registration.ttl > absl::Hours(24)) {
    return absl::InvalidArgumentError(
        absl::StrCat("--coordinator_ttl=", absl::GetFlag(FLAGS_coordinator_ttl),
                     ": must be between 2 and 86400 seconds"));
  }
  if (f.address.empty()) return f;
  if (absl::StatusOr<CoordinatorAddress> a = ParseCoordinatorAddress(f.address); !a.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--coordinator: ", a.status().message()));
  }
  if (absl::Status s = f.registration.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--job: ", s.message()));
  }
  return f;
}

}  // namespace ps
