#include "server/rpc_metrics.h"

#include <string>
#include <utility>
#include <vector>

#include "gtest/gtest.h"

namespace ps {
namespace {

// The calls that record themselves name their method by ServiceMethod,
// which must index the table's entry of that name.
TEST(RpcMetrics, ServiceMethodsIndexTheirEntries) {
  const RpcMetrics m;
  const std::vector<std::pair<RpcMetrics::ServiceMethod, std::string>> names = {
      {RpcMetrics::kRegister, "Register"},     {RpcMetrics::kInitParams, "InitParams"},
      {RpcMetrics::kPush, "Push"},             {RpcMetrics::kPull, "Pull"},
      {RpcMetrics::kPushPull, "PushPull"},     {RpcMetrics::kStream, "Stream"},
      {RpcMetrics::kHeartbeat, "Heartbeat"},   {RpcMetrics::kGetStatus, "GetStatus"},
      {RpcMetrics::kCheckpoint, "Checkpoint"}, {RpcMetrics::kPullRows, "PullRows"},
      {RpcMetrics::kPushRows, "PushRows"}};
  for (const auto& [method, name] : names) {
    EXPECT_EQ(m.MethodIndex("/ps.v1.ParameterServer/" + name), method) << name;
  }
}

// A CallRecord records its call once: when Finished, with that code (so a
// client that has its reply finds it counted), or, if never finished, when
// destroyed, as CANCELLED; with no metrics, nothing.
TEST(CallRecord, RecordsItsCallOnceWhenFinishedOrDestroyed) {
  RpcMetrics m;
  const int ok = static_cast<int>(grpc::StatusCode::OK);
  const int cancelled = static_cast<int>(grpc::StatusCode::CANCELLED);
  {
    CallRecord r(&m, RpcMetrics::kPush);
    EXPECT_EQ(m.handled(RpcMetrics::kPush, ok), 0);
    r.Finished(grpc::StatusCode::OK);
    EXPECT_EQ(m.handled(RpcMetrics::kPush, ok), 1);
    r.Finished(grpc::StatusCode::INTERNAL);
  }
  EXPECT_EQ(m.handled(RpcMetrics::kPush, ok), 1);
  EXPECT_EQ(m.handled(RpcMetrics::kPush, cancelled), 0);
  EXPECT_EQ(m.handling(RpcMetrics::kPush).count, 1);
  { CallRecord r(&m, RpcMetrics::kStream); }
  EXPECT_EQ(m.handled(RpcMetrics::kStream, cancelled), 1);
  EXPECT_EQ(m.handling(RpcMetrics::kStream).count, 1);
  { CallRecord r(nullptr, RpcMetrics::kPull); }
  EXPECT_EQ(m.handled(RpcMetrics::kPull, cancelled), 0);
}

}  // namespace
}  // namespace ps
