// The hostile loads of hostile_load (tests/hostile_load_main.cc): calls a
// misbehaving client leaves open on a ps_server, kept open until the object
// is destroyed or Cancel() is called, for the memory figures of
// docs/operating.md.
//
// Not thread-safe, but for the counts of answered calls (Answered), which
// gRPC's callback threads update. Owns its channels, contexts and streams.
#ifndef PS_TESTS_HOSTILE_LOAD_H_
#define PS_TESTS_HOSTILE_LOAD_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "grpcpp/grpcpp.h"
#include "proto/ps.grpc.pb.h"

namespace ps {

class HostileLoad {
 public:
  // Calls to `server` (plaintext), `per_channel` on a connection of their own.
  HostileLoad(std::string server, int per_channel);

  // Opens `count` streams that send a valid first 1 MB chunk of a push and
  // then go silent.
  void SilentPushes(int count);
  // Starts `count` unary pulls of a version that never comes (worker 1 never
  // pushes), answered at the server's --pull_timeout.
  void WaitingPulls(int count);
  // One init declaring a 1 GiB model and sending 4 MB of it; its status.
  grpc::Status HugeInit();

  // How many calls the server has answered, by status code.
  int Answered(std::map<int, int>* codes) const;
  // Cancels every call still open.
  void Cancel();

 private:
  v1::ParameterServer::Stub* StubFor(int call);

  const std::string server_;
  const int per_channel_;
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;
  std::vector<std::unique_ptr<grpc::ClientContext>> contexts_;
  std::vector<std::unique_ptr<grpc::ClientReaderWriter<v1::StreamRequest, v1::StreamResponse>>>
      streams_;
  std::vector<std::unique_ptr<v1::PullResponse>> pull_replies_;
  mutable absl::Mutex mu_;
  std::map<int, int> codes_ ABSL_GUARDED_BY(mu_);  // status code -> calls
  int answered_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_TESTS_HOSTILE_LOAD_H_
