#include "rpc/route.h"

#include <utility>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ps {

std::string FormatRoute(const Route& route) {
  return absl::StrCat(route.shard, "/", route.num_shards, "@", route.map_version);
}

absl::StatusOr<Route> ParseRoute(absl::string_view text) {
  const auto bad = [text](absl::string_view why) {
    return absl::InvalidArgumentError(absl::StrCat(kRouteMetadataKey, " metadata '", text,
                                                   "' is not SHARD/NUM_SHARDS@MAP_VERSION: ", why));
  };
  const std::vector<absl::string_view> at = absl::StrSplit(text, absl::MaxSplits('@', 1));
  if (at.size() != 2) return bad("no '@'");
  const std::vector<absl::string_view> slash = absl::StrSplit(at[0], absl::MaxSplits('/', 1));
  if (slash.size() != 2) return bad("no '/'");
  Route r;
  if (!absl::SimpleAtoi(slash[0], &r.shard) || !absl::SimpleAtoi(slash[1], &r.num_shards) ||
      !absl::SimpleAtoi(at[1], &r.map_version)) {
    return bad("not integers");
  }
  if (r.num_shards < 1 || r.shard < 0 || r.shard >= r.num_shards) {
    return bad("the shard is not in [0, NUM_SHARDS)");
  }
  if (r.map_version < 0) return bad("negative version");
  return r;
}

absl::Status CheckRoute(const Route& stamped, const Route& here) {
  if (stamped.shard != here.shard || stamped.num_shards != here.num_shards) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this call was meant for shard ", stamped.shard, " of ", stamped.num_shards,
        " but reached the server of shard ", here.shard, " of ", here.num_shards,
        stamped.map_version > 0
            ? absl::StrCat(" (routed by shard map version ", stamped.map_version, ")")
            : std::string(),
        ": the client's server list is out of date or out of order; nothing was done"));
  }
  if (stamped.map_version > 0 && here.map_version > 0 && stamped.map_version < here.map_version) {
    return absl::FailedPreconditionError(absl::StrCat(
        "this call was routed by shard map version ", stamped.map_version, ", older than version ",
        here.map_version, ", at which this server took shard ", here.shard, " of ", here.num_shards,
        ": read the job's shard map again and retry; nothing was done"));
  }
  return absl::OkStatus();
}

absl::Status RouteGuard::Check(const grpc::ServerContextBase& ctx) const {
  const auto& metadata = ctx.client_metadata();
  const auto it = metadata.find(kRouteMetadataKey);
  if (it == metadata.end()) return absl::OkStatus();
  absl::StatusOr<Route> stamped =
      ParseRoute(absl::string_view(it->second.data(), it->second.size()));
  if (!stamped.ok()) return stamped.status();
  return CheckRoute(*stamped, Route{shard_, num_shards_, owned_since_.load()});
}

namespace {

using grpc::experimental::InterceptionHookPoints;

class RouteStamp final : public grpc::experimental::Interceptor {
 public:
  explicit RouteStamp(std::string value) : value_(std::move(value)) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_INITIAL_METADATA)) {
      methods->GetSendInitialMetadata()->insert({kRouteMetadataKey, value_});
    }
    methods->Proceed();
  }

 private:
  const std::string value_;
};

class RouteStampFactory final : public grpc::experimental::ClientInterceptorFactoryInterface {
 public:
  RouteStampFactory(int shard, int num_shards,
                    std::shared_ptr<const std::atomic<int64_t>> map_version)
      : shard_(shard), num_shards_(num_shards), map_version_(std::move(map_version)) {}

  grpc::experimental::Interceptor* CreateClientInterceptor(
      grpc::experimental::ClientRpcInfo* /*info*/) override {
    return new RouteStamp(FormatRoute(Route{shard_, num_shards_, map_version_->load()}));
  }

 private:
  const int shard_;
  const int num_shards_;
  const std::shared_ptr<const std::atomic<int64_t>> map_version_;
};

}  // namespace

std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> RouteStamps(
    int shard, int num_shards, std::shared_ptr<const std::atomic<int64_t>> map_version) {
  return std::make_unique<RouteStampFactory>(shard, num_shards, std::move(map_version));
}

}  // namespace ps
