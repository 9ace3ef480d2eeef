// ShardRows: the unary transport's embedding-row calls (UnaryTransport::
// PullRows and PushRows, client/internal/unary_transport.h), one unary
// protobuf call per shard in parallel on the transport's channels. The
// stream transport carries rows on its streams instead
// (client/internal/stream_transport.h). PsClient (client/ps_client.h)
// groups the ids (client/sparse_ids.h), retries and keeps the state; this
// class only makes the calls and checks what came back.
//
// Thread safety: as PsClient, one operation at a time. Borrows `state`,
// which must outlive it; owns its stubs.
#ifndef PS_CLIENT_INTERNAL_SHARD_ROWS_H_
#define PS_CLIENT_INTERNAL_SHARD_ROWS_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "client/internal/shard_transport.h"
#include "client/pending_op.h"
#include "common/incarnation.h"
#include "grpcpp/channel.h"
#include "proto/ps.grpc.pb.h"

namespace ps {

class ShardRows {
 public:
  // Shard i's calls go over channels[i].
  ShardRows(const std::vector<std::shared_ptr<grpc::Channel>>& channels, const ClientState* state);

  // Rows of `table`: shard s is asked for shard_ids[s] (none: not called)
  // and its rows go to rows[s], which holds exactly what they take
  // (INTERNAL naming the shard when it answers another size). The first
  // error names its shard and address.
  absl::Status Pull(absl::string_view table, const std::vector<std::vector<uint64_t>>& shard_ids,
                    const std::vector<absl::Span<float>>& rows);

  // Pull as an operation in flight; with `min_versions` (by shard), shard s
  // answers once its version is min_versions[s] (PullRowsRequest.
  // min_version), waiting up to the options' wait_timeout. The memory of
  // `rows` must outlive the operation; the arguments are read before it
  // returns.
  std::unique_ptr<PendingOp> StartPull(absl::string_view table,
                                       const std::vector<std::vector<uint64_t>>& shard_ids,
                                       const std::vector<int64_t>& min_versions,
                                       const std::vector<absl::Span<float>>& rows);

  // Tells shard s that shard_ids[s] are the ids of a pull to come
  // (PullRowsRequest.prefetch); answered without rows.
  absl::Status Prefetch(absl::string_view table,
                        const std::vector<std::vector<uint64_t>>& shard_ids);

  // Gradients grads[s] of shard_ids[s] to every shard with ids, for the
  // step state.shard_version[s] (sync) with the async `seq`; outcomes[s]
  // says what each shard did (kApplied for shards not called).
  absl::Status Push(absl::string_view table, const std::vector<std::vector<uint64_t>>& shard_ids,
                    const std::vector<absl::Span<const float>>& grads, int64_t seq,
                    std::vector<PushOutcome>* outcomes);

  // Push, then the rows after it (async and SSP), one call per shard, with
  // the versions `versions` (by shard). `outcomes` and the memory of `rows`
  // must outlive the operation; the arguments are read before it returns.
  std::unique_ptr<PendingOp> StartPushPull(absl::string_view table,
                                           const std::vector<std::vector<uint64_t>>& shard_ids,
                                           const std::vector<absl::Span<const float>>& grads,
                                           int64_t seq, const std::vector<int64_t>& versions,
                                           std::vector<PushOutcome>* outcomes,
                                           const std::vector<absl::Span<float>>& rows);
  // StartPushPull for the steps of state.shard_version, waited on.
  absl::Status PushPull(absl::string_view table,
                        const std::vector<std::vector<uint64_t>>& shard_ids,
                        const std::vector<absl::Span<const float>>& grads, int64_t seq,
                        std::vector<PushOutcome>* outcomes,
                        const std::vector<absl::Span<float>>& rows);

 private:
  const ClientState* const state_;                                 // not owned
  std::vector<std::unique_ptr<v1::ParameterServer::Stub>> stubs_;  // by shard
};

}  // namespace ps

#endif  // PS_CLIENT_INTERNAL_SHARD_ROWS_H_
