// Wire helpers: conversions between core types and the ps.proto messages,
// and absl::Status <-> grpc::Status.
//
// Only the gRPC service (server/service.*) and the client library
// (client/) use this header; core classes never see protos.
// All functions are thread-safe (no shared state).
#ifndef PS_RPC_WIRE_H_
#define PS_RPC_WIRE_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/types/span.h"
#include "common/incarnation.h"
#include "common/mode.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/table_spec.h"
#include "grpcpp/support/status.h"
#include "proto/ps.pb.h"

namespace ps {

// Core <-> proto modes. ModeToProto gives MODE_UNSPECIFIED for a value that
// is not a Mode enumerator, which ModeFromProto (and so every client)
// rejects. ModeFromProto: INVALID_ARGUMENT naming the value and the known
// modes for MODE_UNSPECIFIED or a value this build does not know; never a
// default.
v1::Mode ModeToProto(Mode mode);
absl::StatusOr<Mode> ModeFromProto(v1::Mode mode);

// Core <-> proto model specs.
void ModelSpecToProto(const ModelSpec& spec, v1::ModelSpec* out);
ModelSpec ModelSpecFromProto(const v1::ModelSpec& p);
// Core <-> proto embedding tables (ModelSpec.tables). TablesToProto
// replaces `out`'s tables only; ModelSpecToProto clears them.
void TablesToProto(const std::vector<TableSpec>& tables, v1::ModelSpec* out);
std::vector<TableSpec> TablesFromProto(const v1::ModelSpec& p);

// Core <-> proto incarnations.
void IncarnationToProto(const Incarnation& inc, v1::Incarnation* out);
Incarnation IncarnationFromProto(const v1::Incarnation& p);

// Fills `out` with slice `r` of tensor `t`: name, shape, range and `values`
// (exactly r.length floats).
void SliceToProto(const TensorSpec& t, const SliceRange& r, absl::Span<const float> values,
                  v1::TensorSlice* out);

// Appends one TensorSlice per entry of `slices`, taking each slice's values
// from `flat` at its flat_offset (a shard's flat buffer).
void AppendFlatSlices(const ModelSpec& spec, const std::vector<SliceRange>& slices,
                      absl::Span<const float> flat,
                      google::protobuf::RepeatedPtrField<v1::TensorSlice>* out);

grpc::Status ToGrpcStatus(const absl::Status& s);
absl::Status FromGrpcStatus(const grpc::Status& s);

}  // namespace ps

#endif  // PS_RPC_WIRE_H_
