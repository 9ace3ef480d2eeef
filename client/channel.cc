#include "client/channel.h"

#include <algorithm>
#include <climits>
#include <cstdint>

#include "grpcpp/create_channel.h"
#include "rpc/credentials.h"

namespace ps {

std::shared_ptr<grpc::Channel> MakeChannel(const std::string& address,
                                           absl::Duration keepalive) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);
  args.SetMaxSendMessageSize(INT_MAX);
  // Each client gets its own connection rather than sharing one per process.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  if (keepalive > absl::ZeroDuration()) {
    const int ms = static_cast<int>(
        std::clamp<int64_t>(absl::ToInt64Milliseconds(keepalive), 1000, INT_MAX));
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, ms);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, ms);
    args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);  // also while a call waits
  }
  return grpc::CreateCustomChannel(address, ps::MakeChannelCredentials(), args);
}

}  // namespace ps
