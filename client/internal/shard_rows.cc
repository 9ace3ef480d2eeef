#include "client/internal/shard_rows.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "client/internal/pending_calls.h"
#include "common/float_bytes.h"
#include "rpc/wire.h"

namespace ps {
namespace {

// The servers of the shards that have ids; empty names for the others,
// which StartRowCalls skips.
std::vector<bool> Called(const std::vector<std::vector<uint64_t>>& shard_ids) {
  std::vector<bool> called;
  for (const auto& ids : shard_ids) called.push_back(!ids.empty());
  return called;
}

// StartUnaryCalls for the shards in `called` only (the others are done at
// once), each with `timeout`.
template <typename Req, typename Resp, typename Start>
std::unique_ptr<PendingOp> StartShards(const ClientState& state, const std::vector<bool>& called,
                                       absl::Duration timeout,
                                       const std::function<void(int, Req*)>& build, Start start,
                                       std::function<absl::Status(int, const Resp&)> on_reply) {
  std::vector<std::string> servers = state.options.servers;
  std::vector<int> shard_of;  // position -> shard
  std::vector<std::string> called_servers;
  for (int s = 0; s < static_cast<int>(servers.size()); ++s) {
    if (!called[s]) continue;
    shard_of.push_back(s);
    called_servers.push_back(servers[s]);
  }
  if (called_servers.empty()) return PendingCalls::Failed(absl::OkStatus());
  return StartUnaryCalls<Req, Resp>(
      called_servers, timeout, /*wait_for_ready=*/false, &state.canceller,
      [&](int i, Req* req) { build(shard_of[i], req); },
      [shard_of, start](int i, auto... args) { start(shard_of[i], args...); },
      [shard_of, on_reply](int i, const Resp& r) { return on_reply(shard_of[i], r); });
}

// StartShards with the RPC timeout, waited on.
template <typename Req, typename Resp, typename Start>
absl::Status CallShards(const ClientState& state, const std::vector<bool>& called,
                        const std::function<void(int, Req*)>& build, Start start,
                        std::function<absl::Status(int, const Resp&)> on_reply) {
  return StartShards<Req, Resp>(state, called, state.options.rpc_timeout, build, start,
                                std::move(on_reply))
      ->Wait();
}

// A shard's answered rows into `out`, which holds what they take; INTERNAL
// if the answer holds another number of bytes.
absl::Status TakeRows(const std::string& values, absl::Span<float> out) {
  if (values.size() != out.size() * sizeof(float)) {
    return absl::InternalError(absl::StrCat("answered ", values.size(), " bytes of rows, expected ",
                                            out.size() * sizeof(float)));
  }
  CopyPieces({absl::string_view(values)}, out.data());
  return absl::OkStatus();
}

void FillPullRows(int worker, absl::string_view table, const std::vector<uint64_t>& ids,
                  bool prefetch, v1::PullRowsRequest* req) {
  req->set_worker_id(worker);
  req->set_table(std::string(table));
  req->mutable_ids()->Add(ids.begin(), ids.end());
  req->set_prefetch(prefetch);
}

}  // namespace

ShardRows::ShardRows(const std::vector<std::shared_ptr<grpc::Channel>>& channels,
                     const ClientState* state)
    : state_(state) {
  for (const auto& channel : channels) stubs_.push_back(v1::ParameterServer::NewStub(channel));
}

absl::Status ShardRows::Pull(absl::string_view table,
                             const std::vector<std::vector<uint64_t>>& shard_ids,
                             const std::vector<absl::Span<float>>& rows) {
  return StartPull(table, shard_ids, {}, rows)->Wait();
}

std::unique_ptr<PendingOp> ShardRows::StartPull(absl::string_view table,
                                                const std::vector<std::vector<uint64_t>>& shard_ids,
                                                const std::vector<int64_t>& min_versions,
                                                const std::vector<absl::Span<float>>& rows) {
  const ClientOptions& o = state_->options;
  const bool waits = !min_versions.empty();
  return StartShards<v1::PullRowsRequest, v1::PullRowsResponse>(
      *state_, Called(shard_ids), waits ? o.wait_timeout + o.rpc_timeout : o.rpc_timeout,
      [&](int s, v1::PullRowsRequest* req) {
        FillPullRows(o.worker_id, table, shard_ids[s], /*prefetch=*/false, req);
        if (waits) {
          req->set_min_version(min_versions[s]);
          req->set_wait_timeout_ms(absl::ToInt64Milliseconds(o.wait_timeout));
        }
      },
      [this](int s, auto... args) { stubs_[s]->async()->PullRows(args...); },
      [rows](int s, const v1::PullRowsResponse& r) { return TakeRows(r.values(), rows[s]); });
}

absl::Status ShardRows::Prefetch(absl::string_view table,
                                 const std::vector<std::vector<uint64_t>>& shard_ids) {
  const int worker = state_->options.worker_id;
  return CallShards<v1::PullRowsRequest, v1::PullRowsResponse>(
      *state_, Called(shard_ids),
      [&](int s, v1::PullRowsRequest* req) {
        FillPullRows(worker, table, shard_ids[s], /*prefetch=*/true, req);
      },
      [this](int s, auto... args) { stubs_[s]->async()->PullRows(args...); },
      [](int, const v1::PullRowsResponse&) { return absl::OkStatus(); });
}

absl::Status ShardRows::Push(absl::string_view table,
                             const std::vector<std::vector<uint64_t>>& shard_ids,
                             const std::vector<absl::Span<const float>>& grads, int64_t seq,
                             std::vector<PushOutcome>* outcomes) {
  outcomes->assign(shard_ids.size(), PushOutcome::kApplied);
  const ClientState& state = *state_;
  return CallShards<v1::PushRowsRequest, v1::PushRowsResponse>(
      state, Called(shard_ids),
      [&](int s, v1::PushRowsRequest* req) {
        req->set_worker_id(state.options.worker_id);
        req->set_table(std::string(table));
        req->mutable_ids()->Add(shard_ids[s].begin(), shard_ids[s].end());
        EncodeFloats(grads[s], req->mutable_grads());
        req->set_version(state.shard_version[s]);
        req->set_seq(state.mode == Mode::kSync ? 0 : seq);
      },
      [this](int s, auto... args) { stubs_[s]->async()->PushRows(args...); },
      [outcomes](int s, const v1::PushRowsResponse& r) {
        (*outcomes)[s] = static_cast<PushOutcome>(r.outcome());
        return absl::OkStatus();
      });
}

absl::Status ShardRows::PushPull(absl::string_view table,
                                 const std::vector<std::vector<uint64_t>>& shard_ids,
                                 const std::vector<absl::Span<const float>>& grads, int64_t seq,
                                 std::vector<PushOutcome>* outcomes,
                                 const std::vector<absl::Span<float>>& rows) {
  return StartPushPull(table, shard_ids, grads, seq, state_->shard_version, outcomes, rows)->Wait();
}

std::unique_ptr<PendingOp> ShardRows::StartPushPull(
    absl::string_view table, const std::vector<std::vector<uint64_t>>& shard_ids,
    const std::vector<absl::Span<const float>>& grads, int64_t seq,
    const std::vector<int64_t>& versions, std::vector<PushOutcome>* outcomes,
    const std::vector<absl::Span<float>>& rows) {
  outcomes->assign(shard_ids.size(), PushOutcome::kApplied);
  const ClientOptions& o = state_->options;
  return StartShards<v1::PushPullRowsRequest, v1::PushPullRowsResponse>(
      *state_, Called(shard_ids), o.rpc_timeout,
      [&](int s, v1::PushPullRowsRequest* req) {
        req->set_worker_id(o.worker_id);
        req->set_table(std::string(table));
        req->mutable_ids()->Add(shard_ids[s].begin(), shard_ids[s].end());
        EncodeFloats(grads[s], req->mutable_grads());
        req->set_version(versions[s]);
        req->set_seq(seq);
      },
      [this](int s, auto... args) { stubs_[s]->async()->PushPullRows(args...); },
      [outcomes, rows](int s, const v1::PushPullRowsResponse& r) {
        (*outcomes)[s] = static_cast<PushOutcome>(r.outcome());
        return TakeRows(r.values(), rows[s]);
      });
}

}  // namespace ps
