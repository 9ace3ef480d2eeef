#include "rpc/wire.h"

#include "absl/strings/str_cat.h"
#include "common/float_bytes.h"

namespace ps {

v1::Mode ModeToProto(Mode mode) {
  switch (mode) {
    case Mode::kSync:
      return v1::MODE_SYNC;
    case Mode::kAsync:
      return v1::MODE_ASYNC;
    case Mode::kSsp:
      return v1::MODE_SSP;
  }
  return v1::MODE_UNSPECIFIED;
}

absl::StatusOr<Mode> ModeFromProto(v1::Mode mode) {
  switch (mode) {
    case v1::MODE_SYNC:
      return Mode::kSync;
    case v1::MODE_ASYNC:
      return Mode::kAsync;
    case v1::MODE_SSP:
      return Mode::kSsp;
    default:
      break;
  }
  const std::string name = v1::Mode_Name(mode);
  return absl::InvalidArgumentError(
      absl::StrCat("unknown mode ", name.empty() ? absl::StrCat(static_cast<int>(mode)) : name,
                   " on the wire (known: ", KnownModeNames(), ")"));
}

void IncarnationToProto(const Incarnation& inc, v1::Incarnation* out) {
  out->set_run_id(inc.run_id);
  out->set_start(inc.start);
}

Incarnation IncarnationFromProto(const v1::Incarnation& p) {
  return Incarnation{p.run_id(), p.start()};
}

void ModelSpecToProto(const ModelSpec& spec, v1::ModelSpec* out) {
  out->Clear();
  for (const TensorSpec& t : spec) {
    v1::TensorSpec* p = out->add_tensors();
    p->set_name(t.name);
    for (int64_t d : t.shape) p->add_shape(d);
  }
}

ModelSpec ModelSpecFromProto(const v1::ModelSpec& p) {
  ModelSpec spec;
  spec.reserve(p.tensors_size());
  for (const v1::TensorSpec& t : p.tensors()) {
    spec.push_back(TensorSpec{t.name(), {t.shape().begin(), t.shape().end()}});
  }
  return spec;
}

void TablesToProto(const std::vector<TableSpec>& tables, v1::ModelSpec* out) {
  out->clear_tables();
  for (const TableSpec& t : tables) {
    v1::TableSpec* p = out->add_tables();
    p->set_name(t.name);
    p->set_dim(t.dim);
    p->set_seed(t.seed);
    p->set_init_scale(t.init_scale);
  }
}

std::vector<TableSpec> TablesFromProto(const v1::ModelSpec& p) {
  std::vector<TableSpec> tables;
  tables.reserve(p.tables_size());
  for (const v1::TableSpec& t : p.tables()) {
    tables.push_back(TableSpec{t.name(), t.dim(), t.seed(), t.init_scale()});
  }
  return tables;
}

void SliceToProto(const TensorSpec& t, const SliceRange& r, absl::Span<const float> values,
                  v1::TensorSlice* out) {
  out->set_name(t.name);
  for (int64_t d : t.shape) out->add_shape(d);
  out->set_offset(r.offset);
  out->set_length(r.length);
  EncodeFloats(values, out->mutable_data());
}

void AppendFlatSlices(const ModelSpec& spec, const std::vector<SliceRange>& slices,
                      absl::Span<const float> flat,
                      google::protobuf::RepeatedPtrField<v1::TensorSlice>* out) {
  for (const SliceRange& r : slices) {
    SliceToProto(spec[r.tensor_index], r, flat.subspan(r.flat_offset, r.length), out->Add());
  }
}

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace ps
