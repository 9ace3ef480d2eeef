// RpcMetrics: what a server's RPCs did, by method and status code, in the
// gRPC ecosystem's names (grpc_server_handled_total{grpc_service,
// grpc_method,grpc_type,grpc_code}, grpc_server_handling_seconds). The
// ParameterServer service's calls record themselves when they end
// (server/service.h, server/stream_reactor.h), with the status they were
// finished with, or CANCELLED if they end without one; a gRPC server
// interceptor (RpcMetricsInterceptors) records the other services' calls
// (health, reflection) the same way. Calls the port's AuthProcessor refuses
// (rpc/auth_processor.h) reach neither; ps_server counts them through its
// OnRefused hook (RecordRefused). Ours are not intercepted because gRPC
// makes every operation of an intercepted call go round its completion queue
// twice: intercepted, the stream that carries every step cost sync training
// about 2% (docs/metrics.md, Cost).
//
// Methods are a fixed table (proto/ps.proto's ParameterServer, the health
// service, reflection); any other is counted as "other", so labels stay few.
//
// Thread-safe; relaxed atomics (server/core/stats.h), no lock on the call path.
#ifndef PS_SERVER_RPC_METRICS_H_
#define PS_SERVER_RPC_METRICS_H_

#include <array>
#include <memory>
#include <string>
#include <vector>

#include "absl/strings/string_view.h"
#include "absl/time/clock.h"
#include "absl/time/time.h"
#include "grpcpp/support/server_interceptor.h"
#include "server/core/stats.h"

namespace ps {

class RpcMetrics {
 public:
  struct Method {
    const char* service;  // "ps.v1.ParameterServer"
    const char* name;     // "Push"
    const char* type;     // "unary", "bidi_stream", "server_stream"
  };
  static constexpr int kNumCodes = 17;  // grpc::StatusCode 0..16

  RpcMetrics();

  // The indexes in methods() of ps.v1.ParameterServer's methods, for the
  // calls that record themselves.
  enum ServiceMethod : int {
    kRegister,
    kInitParams,
    kPush,
    kPull,
    kPushPull,
    kStream,
    kHeartbeat,
    kGetStatus,
    kCheckpoint,
    kPullRows,
    kPushRows,
    kPushPullRows,
  };

  // The index of `path` (":path", "/ps.v1.ParameterServer/Push") in
  // methods(); the last entry ("other") when unknown.
  int MethodIndex(absl::string_view path) const;
  const std::vector<Method>& methods() const { return methods_; }

  // One finished call.
  void RecordCall(int method, int code, absl::Duration took);
  // One call the port's AuthProcessor refused (`path` as MethodIndex takes
  // it): counted in grpc_server_handled_total with its code, not timed,
  // since no handler ran.
  void RecordRefused(absl::string_view path, int code);

  // Readers (any thread).
  int64_t handled(int method, int code) const;
  Histogram::Snapshot handling(int method) const;

 private:
  // Counts one call of `method` in handled_total (a code out of range as
  // UNKNOWN).
  void Count(int method, int code);

  struct PerMethod {
    std::array<Counter, kNumCodes> handled;
    Histogram handling;
  };
  std::vector<Method> methods_;
  std::unique_ptr<PerMethod[]> per_method_;
};

// One call of a method that records itself (the service's reactors): it
// starts when made and is recorded in `metrics` (null: nowhere) by Finished,
// which the reactor calls just before it finishes the call, so that a
// client that has its reply also finds its call counted; or, if Finished
// was never called, when destroyed, as CANCELLED.
// Not thread-safe: its reactor's callbacks, which gRPC orders, use it.
class CallRecord {
 public:
  CallRecord(RpcMetrics* metrics, RpcMetrics::ServiceMethod method)
      : metrics_(metrics), method_(method) {}
  ~CallRecord() { Finished(grpc::StatusCode::CANCELLED); }
  CallRecord(const CallRecord&) = delete;
  CallRecord& operator=(const CallRecord&) = delete;

  // Records the call with `code`; later calls do nothing.
  void Finished(grpc::StatusCode code) {
    if (metrics_ == nullptr || recorded_) return;
    recorded_ = true;
    metrics_->RecordCall(method_, code, absl::Now() - start_);
  }

 private:
  RpcMetrics* const metrics_;
  const RpcMetrics::ServiceMethod method_;
  const absl::Time start_ = absl::Now();
  bool recorded_ = false;
};

// grpc-go's name of status code `code` ("OK", "Canceled", "InvalidArgument",
// ...), the grpc_code label's values in the gRPC ecosystem; "Unknown" for
// codes out of range.
const char* GrpcCodeName(int code);

// The interceptor creators to give grpc::ServerBuilder (experimental()
// .SetInterceptorCreators) so every call is recorded in `metrics`.
std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(std::shared_ptr<RpcMetrics> metrics);

}  // namespace ps

#endif  // PS_SERVER_RPC_METRICS_H_
