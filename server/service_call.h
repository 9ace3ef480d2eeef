// The pieces every unary handler of ParameterServerService
// (server/service.h) shares: its reactor, and who made the call. Internal to
// the service's files (service.cc, service_rows.cc).
//
// CallReactor deletes itself when gRPC is done with it; Caller is a value.
#ifndef PS_SERVER_SERVICE_CALL_H_
#define PS_SERVER_SERVICE_CALL_H_

#include <optional>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "common/status_macros.h"
#include "rpc/auth_processor.h"
#include "server/replies.h"
#include "server/service.h"

namespace ps {
namespace service_internal {

// The reactor of every unary call. Done finishes the call and records it in
// `metrics` (null: not recorded) with its status; a call that never finished
// is recorded as CANCELLED when gRPC is done with it. When the client
// cancels or goes away, the shard drops the call's wait (if it waits)
// instead of holding it to its deadline.
class CallReactor final : public grpc::ServerUnaryReactor {
 public:
  CallReactor(Shard* shard, RpcMetrics* metrics, RpcMetrics::ServiceMethod method)
      : wait_(shard), record_(metrics, method) {}

  CallWait* wait() { return &wait_; }
  void Done(const grpc::Status& s) {
    record_.Finished(s.error_code());  // before the client can see the status
    Finish(s);
  }
  void OnCancel() override { wait_.Cancel(); }
  void OnDone() override { delete this; }

 private:
  CallWait wait_;
  CallRecord record_;
};

inline CallReactor* NewCall(Shard* shard, const ServiceOptions& options,
                            RpcMetrics::ServiceMethod method) {
  return new CallReactor(shard, options.rpc_metrics.get(), method);
}

// Finishes `reactor` with the status of the exception being handled.
inline void FinishWithException(CallReactor* reactor, const char* method) {
  reactor->Done(ToGrpcStatus(StatusFromCurrentException(method)));
}

// Who made a call (nullopt: the port authenticates no one), for the checks
// of what a request says (rpc/authz.h AuthorizeWorker); the method itself
// was authorized by the port's AuthProcessor.
struct Caller {
  std::optional<Identity> who;

  absl::Status MayActAs(absl::string_view call, int worker_id,
                        bool creates_parameters = false) const {
    if (!who.has_value()) return absl::OkStatus();
    return AuthorizeWorker(*who, call, worker_id, creates_parameters);
  }
  // A reader's pulls keep no worker's lease alive.
  bool renews_lease() const { return !who.has_value() || who->role != Role::kReader; }
};

// The call's caller, once its route is checked (a call routed here by
// mistake is refused before anything else: rpc/route.h).
inline absl::StatusOr<Caller> CallerOfCall(const CallChecks& checks,
                                           const grpc::ServerContextBase& ctx) {
  if (checks.route != nullptr) RETURN_IF_ERROR(checks.route->Check(ctx));
  ASSIGN_OR_RETURN(std::optional<Identity> who, ps::CallerOf(checks.authenticator, ctx));
  return Caller{std::move(who)};
}

inline absl::Status MayActAs(const CallChecks& checks, const grpc::ServerContextBase& ctx,
                             absl::string_view call, int worker_id,
                             bool creates_parameters = false) {
  ASSIGN_OR_RETURN(Caller caller, CallerOfCall(checks, ctx));
  return caller.MayActAs(call, worker_id, creates_parameters);
}

}  // namespace service_internal
}  // namespace ps

#endif  // PS_SERVER_SERVICE_CALL_H_
