#include "tests/fuzz/rows_fuzz.h"

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/types/span.h"
#include "common/table_spec.h"
#include "google/protobuf/stubs/logging.h"
#include "proto/ps.pb.h"
#include "rpc/wire.h"
#include "server/core/sparse_tables.h"
#include "tests/fuzz/fuzz_check.h"


namespace ps {
namespace fuzz {
namespace {

constexpr int kWorkers = 3;
constexpr int64_t kMaxRows = 8;
constexpr int64_t kMaxIds = 16;
constexpr int64_t kOpenStep = 2;  // sync: the step the shard is in

// The server the requests meet, chosen by the input's header: shard
// in.shard of in.num_shards; the number of cut points n gives the mode
// (n & 1: sync, else async), --evict_lru (n & 2) and the optimizer (n & 4:
// FTRL, else AdaGrad). Tables "emb" (dim 3) and "one" (dim 1) declared.
struct RowsSetting {
  explicit RowsSetting(const FuzzInput& in)
      : sync((in.cuts.size() & 1) != 0),
        tables(Options(in), sync ? Mode::kSync : Mode::kAsync, in.shard, in.num_shards,
               kWorkers, /*reject_nonfinite=*/true) {
    FUZZ_CHECK(tables.Declare({TableSpec{"emb", 3, 11, 0.5f}, TableSpec{"one", 1, 12, 0.0f}}).ok());
  }
  static SparseTablesOptions Options(const FuzzInput& in) {
    SparseTablesOptions o;
    o.max_rows = kMaxRows;
    o.max_ids_per_request = kMaxIds;
    o.evict_lru = (in.cuts.size() & 2) != 0;
    o.optimizer.kind = (in.cuts.size() & 4) != 0 ? SparseOptimizerKind::kFtrl
                                                  : SparseOptimizerKind::kAdagrad;
    o.optimizer.lr = 0.1f;
    FUZZ_CHECK(o.Validate().ok());
    return o;
  }
  bool sync;
  SparseTables tables;
};

bool OneOf(const absl::Status& s, std::initializer_list<absl::StatusCode> codes) {
  if (s.ok()) return true;
  for (absl::StatusCode c : codes) {
    if (s.code() == c) return true;
  }
  return false;
}

// No table past its bound; every table's rows counted.
void CheckBounds(const SparseTables& t) {
  for (const TableUsage& u : t.Usage()) FUZZ_CHECK(u.rows >= 0 && u.rows <= kMaxRows);
  const absl::StatusOr<std::vector<EmbeddingTableState>> tables = t.Export();
  FUZZ_CHECK(tables.ok());
  for (const EmbeddingTableState& s : *tables) {
    FUZZ_CHECK(static_cast<int64_t>(s.contents.ids.size()) <= kMaxRows);
  }
}

// A pull as the shard answers it, with the pull's properties checked.
void PullAndCheck(SparseTables* t, absl::string_view table, absl::Span<const uint64_t> ids) {
  std::vector<float> out;
  const absl::Status s = t->Pull(table, ids, &out);
  FUZZ_CHECK(OneOf(s, {absl::StatusCode::kNotFound, absl::StatusCode::kInvalidArgument,
                       absl::StatusCode::kResourceExhausted}));
  CheckBounds(*t);
  if (!s.ok()) {
    // Refused before growing the answer (SparseTables::Pull's contract).
    FUZZ_CHECK(out.empty());
    return;
  }
  const absl::StatusOr<int> dim = t->DimOf(table);
  FUZZ_CHECK(dim.ok());
  FUZZ_CHECK(out.size() == ids.size() * static_cast<size_t>(*dim));
  std::vector<float> again;
  FUZZ_CHECK(t->Pull(table, ids, &again).ok());
  FUZZ_CHECK(again.size() == out.size());
  if (!out.empty()) {
    FUZZ_CHECK(std::memcmp(out.data(), again.data(), out.size() * sizeof(float)) == 0);
  }
}

// Parses the whole message; false if protobuf refuses it (as gRPC would,
// before the service sees it). Quiet: protobuf logs each bad UTF-8 string.
bool Parse(const FuzzInput& in, google::protobuf::MessageLite* out) {
  google::protobuf::LogSilencer quiet;
  return out->ParseFromArray(in.message.data(), static_cast<int>(in.message.size()));
}

}  // namespace

void FuzzPullRows(const FuzzInput& in) {
  v1::PullRowsRequest req;
  if (!Parse(in, &req)) return;
  // The shard refuses worker ids out of range before the tables see them.
  if (req.worker_id() < 0 || req.worker_id() >= kWorkers) return;
  RowsSetting server(in);
  PullAndCheck(&server.tables, req.table(), req.ids());
}

void FuzzPushRows(const FuzzInput& in) {
  v1::PushRowsRequest req;
  if (!Parse(in, &req)) return;
  // What the service and the shard refuse first: bytes that are not whole
  // floats, worker ids out of range, negative versions and seqs.
  if (req.grads().size() % sizeof(float) != 0) return;
  if (req.worker_id() < 0 || req.worker_id() >= kWorkers) return;
  if (req.version() < 0 || req.seq() < 0) return;
  std::vector<float> grads(req.grads().size() / sizeof(float));
  if (!grads.empty()) std::memcpy(grads.data(), req.grads().data(), req.grads().size());

  RowsSetting server(in);
  SparseTables& t = server.tables;
  const auto push = [&] {
    return t.Push(req.worker_id(), req.table(), req.version(), req.seq(), kOpenStep, req.ids(),
                  grads);
  };
  const absl::StatusOr<PushOutcome> first = push();
  FUZZ_CHECK(OneOf(first.status(),
                   {absl::StatusCode::kNotFound, absl::StatusCode::kInvalidArgument,
                    absl::StatusCode::kResourceExhausted,
                    absl::StatusCode::kFailedPrecondition}));
  FUZZ_CHECK(server.sync || first.status().code() != absl::StatusCode::kFailedPrecondition);
  CheckBounds(t);
  if (!first.ok()) {
    PullAndCheck(&t, req.table(), req.ids());
    return;
  }
  // Offered again: a duplicate when the first was counted and can be told apart.
  const absl::StatusOr<PushOutcome> second = push();
  if (*first == PushOutcome::kApplied && (server.sync || req.seq() > 0)) {
    FUZZ_CHECK(second.ok() && *second == PushOutcome::kDuplicate);
  }
  if (server.sync && req.version() == kOpenStep) {
    t.NoteDenseAccepted(req.worker_id());
    t.CloseStep(kOpenStep, 1);
  }
  CheckBounds(t);
  PullAndCheck(&t, req.table(), req.ids());
}

void FuzzTableSpecs(const FuzzInput& in) {
  v1::ModelSpec proto;
  if (!Parse(in, &proto)) return;
  const std::vector<TableSpec> specs = TablesFromProto(proto);
  TableLimits small;  // small enough for the fuzzer to reach every limit
  small.max_tables = 3;
  small.max_name_bytes = 8;
  small.max_dim = 16;
  for (const TableLimits& limits : {TableLimits(), small}) {
    const absl::Status s = ValidateTableSpecs(specs, limits);
    FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument);
    if (!s.ok()) continue;
    FUZZ_CHECK(specs.size() <= static_cast<size_t>(limits.max_tables));
    for (const TableSpec& t : specs) {
      FUZZ_CHECK(!t.name.empty() && t.name.size() <= static_cast<size_t>(limits.max_name_bytes));
      FUZZ_CHECK(t.dim >= 1 && t.dim <= limits.max_dim);
      FUZZ_CHECK(t.init_scale >= 0 && t.init_scale <= 3.0e38f);
    }
    FUZZ_CHECK(CompareTableSpecs(specs, specs).ok());
  }
  // Declared on a server with the small limits: refused (INVALID_ARGUMENT)
  // when not valid, declared once, and every table serves rows within
  // its init_scale.
  SparseTablesOptions o;
  o.max_rows = kMaxRows;
  o.limits = small;
  SparseTables t(o, Mode::kAsync, 0, 1, kWorkers, true);
  const absl::Status declared = t.Declare(specs);
  FUZZ_CHECK(declared.ok() || declared.code() == absl::StatusCode::kInvalidArgument);
  FUZZ_CHECK(declared.ok() == ValidateTableSpecs(specs, small).ok());
  if (!declared.ok() || specs.empty()) return;
  FUZZ_CHECK(t.specs() == specs);
  FUZZ_CHECK(t.Declare(specs).ok());
  for (const TableSpec& spec : specs) {
    const uint64_t ids[] = {0, 1, 2};
    std::vector<float> out;
    FUZZ_CHECK(t.Pull(spec.name, ids, &out).ok());
    FUZZ_CHECK(out.size() == 3 * static_cast<size_t>(spec.dim));
    for (float f : out) FUZZ_CHECK(std::isfinite(f) && std::fabs(f) <= spec.init_scale);
  }
}

}  // namespace fuzz
}  // namespace ps
