// Route: which shard a client meant a call for. PsClient stamps every call
// it makes with it, as gRPC metadata
//
//   ps-route: SHARD/NUM_SHARDS@MAP_VERSION      e.g. "1/2@7"
//
// where MAP_VERSION is the version of the job's shard map the client found
// the servers in (coord/shard_map.h; 0: the servers were given, not read
// from a map). A server refuses a call routed to it by mistake before it
// does anything (RouteGuard, CheckRoute), so that a push is never applied
// to a shard it was not meant for, and a client routing by an old map
// hears so, reads the map again and retries there (docs/elastic.md, "The
// shard map"):
//
//   - a call meant for another shard, or for another shard count, is
//     FAILED_PRECONDITION naming both: the address now serves another
//     shard (servers swapped addresses, or a list out of order);
//   - a call routed by a map older than the version at which this server
//     took its shard is FAILED_PRECONDITION naming both versions: in that
//     map the shard's server was another.
//
// A call without the metadata (tools, clients that predate it) is not
// checked. Route, FormatRoute, ParseRoute and CheckRoute are values and
// pure functions; RouteGuard is thread-safe; the interceptor factory
// (RouteStamps) may be shared by a channel's calls.
#ifndef PS_RPC_ROUTE_H_
#define PS_RPC_ROUTE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "grpcpp/server_context.h"
#include "grpcpp/support/client_interceptor.h"

namespace ps {

// The metadata key.
inline constexpr char kRouteMetadataKey[] = "ps-route";

struct Route {
  int shard = 0;
  int num_shards = 1;
  int64_t map_version = 0;  // 0: not routed by a shard map
};

// "SHARD/NUM_SHARDS@MAP_VERSION".
std::string FormatRoute(const Route& route);

// INVALID_ARGUMENT naming the text unless it is FormatRoute's with
// 0 <= shard < num_shards and map_version >= 0.
absl::StatusOr<Route> ParseRoute(absl::string_view text);

// The server's rule. `here` is this server's shard, shard count and the map
// version at which it took its shard (0: unknown, no version check); a
// stamped version of 0 is not checked either. OK, or FAILED_PRECONDITION
// saying what went wrong and what the client does about it.
absl::Status CheckRoute(const Route& stamped, const Route& here);

// The server's side: its shard, and the version it took it at, which the
// coordinator updates as the server publishes itself in the map.
class RouteGuard {
 public:
  RouteGuard(int shard, int num_shards) : shard_(shard), num_shards_(num_shards) {}

  // The version of the shard map that gave this server its shard (the
  // map this server's publish left; 0: none, no version check).
  void set_owned_since(int64_t version) { owned_since_.store(version); }
  int64_t owned_since() const { return owned_since_.load(); }

  // CheckRoute of the call's stamp, if it has one; INVALID_ARGUMENT for a
  // stamp that does not parse.
  absl::Status Check(const grpc::ServerContextBase& ctx) const;

 private:
  const int shard_;
  const int num_shards_;
  std::atomic<int64_t> owned_since_{0};
};

// The client's side: an interceptor factory for the channel to shard
// `shard` of `num_shards` that stamps each call with the version
// `*map_version` holds when the call starts (it may change between calls).
std::unique_ptr<grpc::experimental::ClientInterceptorFactoryInterface> RouteStamps(
    int shard, int num_shards, std::shared_ptr<const std::atomic<int64_t>> map_version);

}  // namespace ps

#endif  // PS_RPC_ROUTE_H_
