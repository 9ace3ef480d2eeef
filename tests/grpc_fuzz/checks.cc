#include "tests/grpc_fuzz/checks.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "tests/grpc_fuzz/calls.h"

namespace ps {
namespace grpc_fuzz {

namespace health = grpc::health::v1;

absl::StatusOr<v1::StatusResponse> GetStatus(const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::StatusResponse resp;
  grpc::Status s = stub->GetStatus(&ctx, v1::StatusRequest(), &resp);
  if (!s.ok()) return absl::UnavailableError(Describe(s));
  return resp;
}

std::string HealthStatus(const std::string& address) {
  auto stub = health::Health::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  health::HealthCheckResponse resp;
  grpc::Status s = stub->Check(&ctx, health::HealthCheckRequest(), &resp);
  if (!s.ok()) return Describe(s);
  return health::HealthCheckResponse::ServingStatus_Name(resp.status());
}

absl::Status CompletePendingStep(Harness& h, const std::string& address) {
  auto st = GetStatus(address);
  if (!st.ok()) return st.status();
  if (st->waiting_for_size() == 0 || st->waiting_for_size() == h.num_workers)
    return absl::OkStatus();
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  for (int w : st->waiting_for()) {
    v1::PushRequest p;
    p.set_worker_id(w);
    p.set_version(st->version());
    for (const SliceInfo& x : h.slices) {
      v1::TensorSlice* s = p.add_gradients();
      s->set_name(x.name);
      for (int64_t d : x.shape) s->add_shape(d);
      s->set_offset(x.offset);
      s->set_length(x.length);
      s->set_data(std::string(4 * x.length, '\0'));
    }
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::PushResponse resp;
    grpc::Status s = stub->Push(&ctx, p, &resp);
    if (!s.ok()) return absl::InternalError(absl::StrCat("completing step: ", Describe(s)));
  }
  return absl::OkStatus();
}

absl::Status DeclareTables(const Harness& h, const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::InitRequest req;
  req.set_worker_id(0);
  *req.mutable_spec() = h.spec;
  for (const FuzzTable& t : kTables) {
    v1::TableSpec* p = req.mutable_spec()->add_tables();
    p->set_name(t.name);
    p->set_dim(t.dim);
    p->set_seed(7);
  }
  v1::InitResponse resp;
  grpc::Status s = stub->InitParams(&ctx, req, &resp);
  if (!s.ok()) return absl::InternalError(absl::StrCat("declaring the tables: ", Describe(s)));
  return absl::OkStatus();
}

std::string NonFiniteRows(const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  for (const FuzzTable& t : kTables) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
    v1::PullRowsRequest req;
    req.set_table(t.name);
    for (int i = 0; i < kMaxIdsPerRequest; ++i) req.add_ids(i);
    v1::PullRowsResponse resp;
    grpc::Status s = stub->PullRows(&ctx, req, &resp);
    if (s.error_code() == grpc::StatusCode::RESOURCE_EXHAUSTED) continue;  // full
    if (!s.ok()) return absl::StrCat("pulling rows of ", t.name, ": ", Describe(s));
    if (resp.values().size() != size_t{4} * kMaxIdsPerRequest * t.dim) {
      return absl::StrCat(t.name, ": ", resp.values().size(), " bytes of rows");
    }
    for (size_t k = 0; k + 4 <= resp.values().size(); k += 4) {
      float f;
      std::memcpy(&f, &resp.values()[k], 4);
      if (!std::isfinite(f)) return absl::StrCat(t.name, ": row ", k / 4 / t.dim, " is ", f);
    }
  }
  return "";
}

std::string NonFiniteWeights(const std::string& address) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::PullRequest req;
  v1::PullResponse resp;
  grpc::Status s = stub->Pull(&ctx, req, &resp);
  if (!s.ok()) return absl::StrCat("pull failed: ", Describe(s));
  int64_t bad = 0;
  std::string first;
  for (const v1::TensorSlice& t : resp.weights()) {
    const std::string& d = t.data();
    for (size_t k = 0; k + 4 <= d.size(); k += 4) {
      float f;
      std::memcpy(&f, &d[k], 4);
      if (!std::isfinite(f)) {
        if (bad++ == 0) first = absl::StrCat(t.name(), "[", k / 4, "] = ", f);
      }
    }
  }
  return bad == 0 ? ""
                  : absl::StrCat(bad, " non-finite weights at version ", resp.version(), ", first ",
                                 first);
}

absl::StatusOr<std::vector<SliceInfo>> ServerModel(const std::string& address, int num_workers) {
  auto stub = v1::ParameterServer::NewStub(NewChannel(address));
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(absl::Now() + absl::Seconds(10)));
  v1::RegisterRequest req;
  req.set_num_workers(num_workers);
  v1::RegisterResponse resp;
  grpc::Status s = stub->Register(&ctx, req, &resp);
  if (!s.ok()) return absl::UnavailableError(Describe(s));
  if (!resp.initialized()) return absl::FailedPreconditionError("the server has no model");
  std::vector<SliceInfo> out;
  for (const v1::ShardRange& r : resp.layout()) {
    SliceInfo x{r.name(), {}, r.offset(), r.length()};
    for (const v1::TensorSpec& t : resp.spec().tensors()) {
      if (t.name() == r.name()) x.shape.assign(t.shape().begin(), t.shape().end());
    }
    out.push_back(std::move(x));
  }
  return out;
}

}  // namespace grpc_fuzz
}  // namespace ps
