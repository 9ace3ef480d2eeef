#include "coord/coordinator_address.h"

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ps {

absl::StatusOr<CoordinatorAddress> ParseCoordinatorAddress(absl::string_view flag) {
  constexpr absl::string_view kScheme = "etcd://";
  if (!absl::StartsWith(flag, kScheme)) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator \"", flag,
                     "\": expected etcd://HOST:PORT[,HOST:PORT...] (etcd is the only "
                     "coordinator)"));
  }
  CoordinatorAddress a;
  for (absl::string_view e : absl::StrSplit(flag.substr(kScheme.size()), ',')) {
    const size_t colon = e.rfind(':');
    int port = 0;
    if (e.empty() || colon == absl::string_view::npos || colon == 0 ||
        !absl::SimpleAtoi(e.substr(colon + 1), &port) || port < 1 || port > 65535) {
      return absl::InvalidArgumentError(
          absl::StrCat("coordinator \"", flag, "\": endpoint \"", e,
                       "\" is not HOST:PORT with a port in 1..65535"));
    }
    a.endpoints.emplace_back(e);
  }
  return a;
}

}  // namespace ps
