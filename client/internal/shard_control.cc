#include "client/internal/shard_control.h"

#include "absl/strings/str_cat.h"
#include "client/internal/pending_calls.h"
#include "rpc/wire.h"

namespace ps {

ShardControl::ShardControl(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                           const ClientState* state)
    : state_(state) {
  for (const auto& channel : channels) stubs_.push_back(v1::ParameterServer::NewStub(channel));
}

absl::Status ShardControl::RegisterAll(absl::Duration timeout, bool wait_for_ready,
                                       std::vector<v1::RegisterResponse>* replies) {
  const ClientOptions& o = state_->options;
  replies->assign(o.servers.size(), {});
  return StartUnaryCalls<v1::RegisterRequest, v1::RegisterResponse>(
             o.servers, timeout, wait_for_ready, &state_->canceller,
             [&o](int, v1::RegisterRequest* req) {
               req->set_worker_id(o.worker_id);
               req->set_num_workers(o.num_workers);
             },
             [this](int s, auto... args) { stubs_[s]->async()->Register(args...); },
             [replies](int s, const v1::RegisterResponse& r) {
               (*replies)[s] = r;
               return absl::OkStatus();
             })
      ->Wait();
}

absl::Status ShardControl::InitAll(const ConstTensorViews* initial,
                                   std::vector<int64_t>* versions) {
  const ClientState& state = *state_;
  const ClientOptions& o = state.options;
  return StartUnaryCalls<v1::InitRequest, v1::InitResponse>(
             o.servers, o.wait_timeout + o.rpc_timeout, /*wait_for_ready=*/false, &state.canceller,
             [&state, initial](int s, v1::InitRequest* req) {
               req->set_worker_id(state.options.worker_id);
               ModelSpecToProto(state.spec, req->mutable_spec());
               TablesToProto(state.tables, req->mutable_spec());
               if (initial != nullptr) {
                 for (const SliceRange& r : state.layouts[s]->slices) {
                   SliceToProto(
                       state.spec[r.tensor_index], r,
                       (*initial)[r.tensor_index].subspan(r.offset, r.length),
                       req->add_values());
                 }
               }
               req->set_wait_timeout_ms(absl::ToInt64Milliseconds(state.options.wait_timeout));
             },
             [this](int s, auto... args) { stubs_[s]->async()->InitParams(args...); },
             [versions](int s, const v1::InitResponse& r) {
               (*versions)[s] = r.version();
               return absl::OkStatus();
             })
      ->Wait();
}

namespace {

// One blocking InitParams call with `timeout`, which `canceller` may end.
absl::StatusOr<v1::InitResponse> CallInit(v1::ParameterServer::Stub* stub,
                                          const v1::InitRequest& req, absl::Duration timeout,
                                          CallCanceller* canceller) {
  v1::InitResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  CallCanceller::Registration registration(canceller, [&ctx] { ctx.TryCancel(); });
  absl::Status st = FromGrpcStatus(stub->InitParams(&ctx, req, &resp));
  if (!st.ok()) return st;
  return resp;
}

}  // namespace

absl::StatusOr<v1::InitResponse> ShardControl::Restore(int shard) {
  const ClientState& state = *state_;
  const ClientOptions& o = state.options;
  v1::InitRequest req;
  req.set_worker_id(o.worker_id);
  ModelSpecToProto(state.spec, req.mutable_spec());
  TablesToProto(state.tables, req.mutable_spec());
  for (const SliceRange& range : state.layouts[shard]->slices) {
    SliceToProto(state.spec[range.tensor_index], range,
                 absl::MakeConstSpan(state.held[shard]).subspan(range.flat_offset, range.length),
                 req.add_values());
  }
  req.set_restore(true);
  req.set_version(state.held_version[shard]);
  absl::StatusOr<v1::InitResponse> resp =
      CallInit(stubs_[shard].get(), req, o.rpc_timeout, &state.canceller);
  if (resp.ok()) return resp;
  return absl::Status(resp.status().code(),
                      absl::StrCat("restoring shard ", shard, " (", o.servers[shard],
                                   "): ", resp.status().message()));
}

absl::StatusOr<v1::InitResponse> ShardControl::RollBack(int shard, int64_t version) {
  v1::InitRequest req;
  req.set_worker_id(state_->options.worker_id);
  req.set_rollback(true);
  req.set_version(version);
  return CallInit(stubs_[shard].get(), req, state_->options.rpc_timeout, &state_->canceller);
}

void ShardControl::HeartbeatAll(absl::Duration timeout) {
  const ClientOptions& o = state_->options;
  StartUnaryCalls<v1::HeartbeatRequest, v1::HeartbeatResponse>(
      o.servers, timeout, /*wait_for_ready=*/false, /*canceller=*/nullptr,
      [&o](int, v1::HeartbeatRequest* req) { req->set_worker_id(o.worker_id); },
      [this](int s, auto... args) { stubs_[s]->async()->Heartbeat(args...); }, nullptr)
      ->Wait()
      .IgnoreError();
}

}  // namespace ps
