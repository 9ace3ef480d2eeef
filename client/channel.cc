#include "client/channel.h"

#include <algorithm>
#include <climits>
#include <cstdint>
#include <utility>

namespace ps {

absl::StatusOr<std::shared_ptr<grpc::Channel>> MakeChannel(const std::string& address,
                                                           absl::Duration keepalive,
                                                           const SecurityOptions& security,
                                                           ClientInterceptors interceptors) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);
  args.SetMaxSendMessageSize(INT_MAX);
  // Each client gets its own connection rather than sharing one per process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // A server that went away is tried again within about 2 s once it is
  // back (gRPC's defaults back off to 2 minutes, and give a connection
  // attempt 20 s), so that a retrying client (ClientOptions::retry_timeout)
  // sees a restarted server soon.
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 200);
  args.SetInt(GRPC_ARG_MIN_RECONNECT_BACKOFF_MS, 2000);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 2000);
  if (keepalive > absl::ZeroDuration()) {
    const int ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(keepalive), 1000, INT_MAX));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // also while a call waits
  }
  return MakeSecureChannel(address, security, std::move(args), std::move(interceptors));
}

}  // namespace ps
