// PsClient's embedding-table calls (client/ps_client.h): ids grouped by
// client/sparse_ids.h, calls made by the transport (ShardTransport::PullRows
// and PushRows: unary calls or the streams), retried as the tensor calls are.
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "client/internal/pending_calls.h"
#include "client/internal/ps_client_rep.h"
#include "client/ps_client.h"
#include "client/sparse_ids.h"
#include "common/status_macros.h"

namespace ps {

absl::Status PsClient::DeclareTables(const std::vector<TableSpec>& tables) {
  if (!rep_->state.spec.empty()) {
    return absl::FailedPreconditionError("DeclareTables must come before Init");
  }
  RETURN_IF_ERROR(ValidateTableSpecs(tables));
  rep_->state.tables = tables;
  return absl::OkStatus();
}

const std::vector<TableSpec>& PsClient::tables() const { return rep_->state.tables; }

absl::StatusOr<int> PsClient::TableDim(absl::string_view table) const {
  for (const TableSpec& t : rep_->state.tables) {
    if (t.name == table) return t.dim;
  }
  return absl::NotFoundError(absl::StrCat("embedding table \"", EscapeName(table),
                                          "\" was not declared (PsClient::DeclareTables)"));
}

absl::Status PsClient::PullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                absl::Span<float> out) {
  ASSIGN_OR_RETURN(const int dim, TableDim(table));
  ASSIGN_OR_RETURN(const int64_t floats, SparseValueCount(ids.size(), dim));
  if (static_cast<int64_t>(out.size()) != floats) {
    return absl::InvalidArgumentError(
        absl::StrCat("PullRows of \"", EscapeName(table), "\": ", ids.size(), " ids of dim ", dim,
                     " need ", floats, " floats, the output holds ", out.size()));
  }
  ASSIGN_OR_RETURN(const SparseRequest request, GroupIds(ids, num_shards()));
  const RowsLanding rows(request, dim, out);
  const auto attempt = [&] {
    return rep_->transport->PullRows(table, request.shard_ids, rows.shards());
  };
  rep_->StartOp();
  RETURN_IF_ERROR(Retry("pull of rows", attempt(), attempt));
  return rows.Scatter();
}

absl::Status PsClient::PrefetchRows(absl::string_view table, absl::Span<const uint64_t> ids) {
  RETURN_IF_ERROR(TableDim(table).status());
  ASSIGN_OR_RETURN(const SparseRequest request, GroupIds(ids, num_shards()));
  rep_->StartOp();
  return rep_->transport->PrefetchRows(table, request.shard_ids);
}

absl::Status PsClient::PushRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                absl::Span<const float> grads) {
  ASSIGN_OR_RETURN(const int dim, TableDim(table));
  ASSIGN_OR_RETURN(const int64_t floats, SparseValueCount(ids.size(), dim));
  if (static_cast<int64_t>(grads.size()) != floats) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushRows of \"", EscapeName(table), "\": ", ids.size(), " ids of dim ", dim,
                     " need ", floats, " gradient floats, got ", grads.size()));
  }
  const int64_t step = version();
  if (mode() == Mode::kSync) {
    auto it = rep_->rows_pushed_step.find(table);
    if (it != rep_->rows_pushed_step.end() && it->second == step) {
      return absl::FailedPreconditionError(absl::StrCat(
          "PushRows of \"", EscapeName(table), "\": its rows were already pushed for step ", step,
          " (sync: once per table per step; sum the gradients first)"));
    }
  }
  ASSIGN_OR_RETURN(const SparseRequest request, GroupIds(ids, num_shards()));
  ASSIGN_OR_RETURN(const ShardGradients summed,
                   GradientsByShard(request, grads.data(), dim, /*borrow=*/true));
  // One seq for every try: the shards deduplicate a retry.
  const int64_t seq = ++rep_->state.row_seq;
  std::vector<PushOutcome> outcomes;
  const auto attempt = [&] {
    return rep_->transport->PushRows(table, request.shard_ids, summed.views, seq, &outcomes);
  };
  rep_->StartOp();
  RETURN_IF_ERROR(Retry("push of rows", attempt(), attempt));
  if (mode() == Mode::kSync) rep_->rows_pushed_step[std::string(table)] = step;
  return absl::OkStatus();
}

namespace {

// PushPullRowsAsync's operation: the calls, then the rows scattered into
// the caller's `out`.
class RowsPushPullOp final : public PendingOp {
 public:
  using Start = std::function<std::unique_ptr<PendingOp>(std::vector<PushOutcome>*,
                                                         const std::vector<absl::Span<float>>&)>;
  using Retry = std::function<absl::Status(absl::Status, const std::function<absl::Status()>&)>;
  RowsPushPullOp(SparseRequest request, int dim, absl::Span<float> out, Start start, Retry retry)
      : request_(std::move(request)),
        rows_(request_, dim, out),
        start_(std::move(start)),
        retry_(std::move(retry)) {
    calls_ = start_(&outcomes_, rows_.shards());
  }

  absl::Status Wait() override {
    absl::Status s = calls_->Wait();
    calls_.reset();
    if (!s.ok()) {
      s = retry_(std::move(s), [this] {
        std::unique_ptr<PendingOp> again = start_(&outcomes_, rows_.shards());
        return again->Wait();
      });
    }
    if (!s.ok()) return s;
    return rows_.Scatter();
  }

 private:
  const SparseRequest request_;
  const RowsLanding rows_;  // into request_'s shards, then the caller's `out`
  const Start start_;
  const Retry retry_;
  std::vector<PushOutcome> outcomes_;
  std::unique_ptr<PendingOp> calls_;  // the first try, until waited on
};

}  // namespace

std::unique_ptr<PendingOp> PsClient::PushPullRowsAsync(absl::string_view table,
                                                       absl::Span<const uint64_t> ids,
                                                       absl::Span<const float> grads,
                                                       absl::Span<float> out) {
  absl::StatusOr<int> dim = TableDim(table);
  if (!dim.ok()) return PendingCalls::Failed(dim.status());
  absl::StatusOr<int64_t> floats = SparseValueCount(ids.size(), *dim);
  if (!floats.ok()) return PendingCalls::Failed(floats.status());
  if (static_cast<int64_t>(grads.size()) != *floats ||
      static_cast<int64_t>(out.size()) != *floats) {
    return PendingCalls::Failed(absl::InvalidArgumentError(absl::StrCat(
        "PushPullRowsAsync of \"", EscapeName(table), "\": ", ids.size(), " ids of dim ", *dim,
        " need ", *floats, " gradient floats and as many for the rows, got ", grads.size(), " and ",
        out.size())));
  }
  const bool sync = mode() == Mode::kSync;
  if (sync) {
    // The push first, and blocking, so that every shard holds it before
    // this worker's dense push can close the step (a push sent beside it
    // could arrive after the close, and be dropped).
    if (absl::Status s = PushRows(table, ids, grads); !s.ok()) return PendingCalls::Failed(s);
  }
  absl::StatusOr<SparseRequest> request = GroupIds(ids, num_shards());
  if (!request.ok()) return PendingCalls::Failed(request.status());
  const int d = *dim;
  RowsPushPullOp::Start start;
  if (sync) {
    // Then the rows of the step that closes: a pull beside the transport
    // that each shard answers at its step's close (PullRowsRequest.
    // min_version).
    std::vector<int64_t> min_versions = rep_->state.shard_version;
    for (int64_t& v : min_versions) ++v;
    start = [this, table = std::string(table), shard_ids = request->shard_ids, min_versions](
                std::vector<PushOutcome>*, const std::vector<absl::Span<float>>& rows) {
      return rep_->rows_beside->StartPull(table, shard_ids, min_versions, rows);
    };
  } else {
    // Copied (the caller's gradients are read before this returns): every
    // try sends the same gradients with one seq, and the shards answer a
    // retry as a duplicate.
    absl::StatusOr<ShardGradients> summed =
        GradientsByShard(*request, grads.data(), d, /*borrow=*/false);
    if (!summed.ok()) return PendingCalls::Failed(summed.status());
    start = [this, table = std::string(table), shard_ids = request->shard_ids,
             summed = std::make_shared<const ShardGradients>(*std::move(summed)),
             seq = ++rep_->state.row_seq, versions = rep_->state.shard_version](
                std::vector<PushOutcome>* outcomes, const std::vector<absl::Span<float>>& rows) {
      return rep_->rows_beside->StartPushPull(table, shard_ids, summed->views, seq, versions,
                                              outcomes, rows);
    };
  }
  // A retry (after the step's push returned) is this client's operation in
  // progress: Retry restores the versions it starts from, which are now.
  auto retry = [this](absl::Status s, const std::function<absl::Status()>& attempt) {
    rep_->op_versions = rep_->state.shard_version;
    rep_->op_seq = rep_->state.seq;
    return Retry("push-pull of rows", std::move(s), attempt);
  };
  rep_->StartOp();
  return std::make_unique<RowsPushPullOp>(*std::move(request), d, out, std::move(start),
                                          std::move(retry));
}

absl::Status PsClient::PushPullRows(absl::string_view table, absl::Span<const uint64_t> ids,
                                    absl::Span<const float> grads, absl::Span<float> out) {
  ASSIGN_OR_RETURN(const int dim, TableDim(table));
  ASSIGN_OR_RETURN(const int64_t floats, SparseValueCount(ids.size(), dim));
  if (static_cast<int64_t>(grads.size()) != floats || static_cast<int64_t>(out.size()) != floats) {
    return absl::InvalidArgumentError(
        absl::StrCat("PushPullRows of \"", EscapeName(table), "\": ", ids.size(), " ids of dim ",
                     dim, " need ", floats, " gradient floats and as many for the rows, got ",
                     grads.size(), " and ", out.size()));
  }
  if (mode() == Mode::kSync) {
    return absl::FailedPreconditionError(absl::StrCat(
        "PushPullRows of \"", EscapeName(table),
        "\": in sync mode pushed rows change only when the step closes, after this worker's "
        "push; use PushPullRowsAsync, then the step's PushPull, then its Wait()"));
  }
  ASSIGN_OR_RETURN(const SparseRequest request, GroupIds(ids, num_shards()));
  ASSIGN_OR_RETURN(const ShardGradients summed,
                   GradientsByShard(request, grads.data(), dim, /*borrow=*/true));
  const int64_t seq = ++rep_->state.row_seq;  // one for every try
  std::vector<PushOutcome> outcomes;
  const RowsLanding rows(request, dim, out);
  const auto attempt = [&] {
    return rep_->transport->PushPullRows(table, request.shard_ids, summed.views, seq, &outcomes,
                                         rows.shards());
  };
  rep_->StartOp();
  RETURN_IF_ERROR(Retry("push-pull of rows", attempt(), attempt));
  return rows.Scatter();
}

}  // namespace ps
