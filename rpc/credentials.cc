#include "rpc/credentials.h"

namespace ps {

std::shared_ptr<grpc::ServerCredentials> MakeServerCredentials() {
  return grpc::InsecureServerCredentials();
}

std::shared_ptr<grpc::ChannelCredentials> MakeChannelCredentials() {
  return grpc::InsecureChannelCredentials();
}

}  // namespace ps
