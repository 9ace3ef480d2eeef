#include "server/rpc_metrics.h"

#include "absl/strings/match.h"
#include "absl/time/clock.h"

namespace ps {
namespace {

using grpc::experimental::InterceptionHookPoints;

class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(RpcMetrics* metrics, int method)
      : metrics_(metrics), method_(method), start_(absl::Now()) {}

  ~MetricsInterceptor() override {
    if (!recorded_) {
      metrics_->RecordCall(method_, static_cast<int>(grpc::StatusCode::CANCELLED),
                           absl::Now() - start_);
    }
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      recorded_ = true;
      metrics_->RecordCall(method_, static_cast<int>(methods->GetSendStatus().error_code()),
                           absl::Now() - start_);
    }
    methods->Proceed();
  }

 private:
  RpcMetrics* const metrics_;
  const int method_;
  const absl::Time start_;
  bool recorded_ = false;  // hooks of one call do not run concurrently
};

class Factory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit Factory(std::shared_ptr<RpcMetrics> metrics) : metrics_(std::move(metrics)) {}

  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    // nullptr: no interceptor on this call (ParameterServer's calls record
    // themselves).
    if (absl::StartsWith(info->method(), "/ps.v1.ParameterServer/")) return nullptr;
    return new MetricsInterceptor(metrics_.get(), metrics_->MethodIndex(info->method()));
  }

 private:
  const std::shared_ptr<RpcMetrics> metrics_;
};

}  // namespace

RpcMetrics::RpcMetrics()
    : methods_({
          // in ServiceMethod's order, then the other services
          {"ps.v1.ParameterServer", "Register", "unary"},
          {"ps.v1.ParameterServer", "InitParams", "unary"},
          {"ps.v1.ParameterServer", "Push", "unary"},
          {"ps.v1.ParameterServer", "Pull", "unary"},
          {"ps.v1.ParameterServer", "PushPull", "unary"},
          {"ps.v1.ParameterServer", "Stream", "bidi_stream"},
          {"ps.v1.ParameterServer", "Heartbeat", "unary"},
          {"ps.v1.ParameterServer", "GetStatus", "unary"},
          {"ps.v1.ParameterServer", "Checkpoint", "unary"},
          {"ps.v1.ParameterServer", "PullRows", "unary"},
          {"ps.v1.ParameterServer", "PushRows", "unary"},
          {"ps.v1.ParameterServer", "PushPullRows", "unary"},
          {"grpc.health.v1.Health", "Check", "unary"},
          {"grpc.health.v1.Health", "Watch", "server_stream"},
          {"grpc.reflection.v1alpha.ServerReflection", "ServerReflectionInfo", "bidi_stream"},
          {"unknown", "other", "unknown"},
      }),
      per_method_(new PerMethod[methods_.size()]) {}

int RpcMetrics::MethodIndex(absl::string_view path) const {
  const int n = static_cast<int>(methods_.size());
  for (int i = 0; i + 1 < n; ++i) {
    const Method& m = methods_[i];
    const absl::string_view service(m.service), name(m.name);
    // "/" service "/" name
    if (path.size() == service.size() + name.size() + 2 && path[0] == '/' &&
        path.substr(1, service.size()) == service && path[service.size() + 1] == '/' &&
        path.substr(service.size() + 2) == name) {
      return i;
    }
  }
  return n - 1;
}

void RpcMetrics::RecordCall(int method, int code, absl::Duration took) {
  Count(method, code);
  per_method_[method].handling.Record(took);
}

void RpcMetrics::RecordRefused(absl::string_view path, int code) { Count(MethodIndex(path), code); }

void RpcMetrics::Count(int method, int code) {
  if (code < 0 || code >= kNumCodes) code = static_cast<int>(grpc::StatusCode::UNKNOWN);
  per_method_[method].handled[code].Add();
}

int64_t RpcMetrics::handled(int method, int code) const {
  return per_method_[method].handled[code].Get();
}
Histogram::Snapshot RpcMetrics::handling(int method) const {
  return per_method_[method].handling.Read();
}

const char* GrpcCodeName(int code) {
  static constexpr const char* kNames[RpcMetrics::kNumCodes] = {
      "OK",       "Canceled",       "Unknown",          "InvalidArgument",   "DeadlineExceeded",
      "NotFound", "AlreadyExists",  "PermissionDenied", "ResourceExhausted", "FailedPrecondition",
      "Aborted",  "OutOfRange",     "Unimplemented",    "Internal",          "Unavailable",
      "DataLoss", "Unauthenticated"};
  return code >= 0 && code < RpcMetrics::kNumCodes ? kNames[code] : "Unknown";
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
RpcMetricsInterceptors(std::shared_ptr<RpcMetrics> metrics) {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> v;
  v.push_back(std::make_unique<Factory>(std::move(metrics)));
  return v;
}

}  // namespace ps
