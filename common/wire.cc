#include "common/wire.h"

namespace ps {

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

grpc::Status ToGrpcStatus(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

absl::Status FromGrpcStatus(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace ps
