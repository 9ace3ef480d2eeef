// PsClient's embedding-table calls (client/ps_client.h): ids grouped by
// client/sparse_ids.h, calls made by the transport (ShardTransport::PullRows
// and PushRows: unary calls or the streams), retried as the tensor calls are.
#include <utility>

#include "absl/strings/str_cat.h"
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
  std::vector<std::vector<float>> rows;
  const auto attempt = [&] {
    return rep_->transport->PullRows(table, dim, request.shard_ids, &rows);
  };
  rep_->StartOp();
  RETURN_IF_ERROR(Retry("pull of rows", attempt(), attempt));
  std::vector<absl::Span<const float>> views(rows.begin(), rows.end());
  return ScatterRows(request, views, dim, out.data());
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
  ASSIGN_OR_RETURN(const std::vector<std::vector<float>> summed,
                   SumGradients(request, grads.data(), dim));
  // One seq for every try: the shards deduplicate a retry.
  const int64_t seq = ++rep_->state.row_seq;
  std::vector<PushOutcome> outcomes;
  const auto attempt = [&] {
    return rep_->transport->PushRows(table, request.shard_ids, summed, seq, &outcomes);
  };
  rep_->StartOp();
  RETURN_IF_ERROR(Retry("push of rows", attempt(), attempt));
  if (mode() == Mode::kSync) rep_->rows_pushed_step[std::string(table)] = step;
  return absl::OkStatus();
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
        "\": in sync mode pushed rows change only when the step closes; use PushRows before the "
        "step's PushPull and PullRows after it"));
  }
  ASSIGN_OR_RETURN(const SparseRequest request, GroupIds(ids, num_shards()));
  ASSIGN_OR_RETURN(const std::vector<std::vector<float>> summed,
                   SumGradients(request, grads.data(), dim));
  const int64_t seq = ++rep_->state.row_seq;  // one for every try
  std::vector<PushOutcome> outcomes;
  std::vector<std::vector<float>> rows;
  const auto attempt = [&] {
    return rep_->transport->PushPullRows(table, dim, request.shard_ids, summed, seq, &outcomes,
                                         &rows);
  };
  rep_->StartOp();
  RETURN_IF_ERROR(Retry("push-pull of rows", attempt(), attempt));
  std::vector<absl::Span<const float>> views(rows.begin(), rows.end());
  return ScatterRows(request, views, dim, out.data());
}

}  // namespace ps
