#include "tests/grpc_fuzz/unary_cases.h"

#include <algorithm>
#include <map>
#include <utility>

#include "absl/strings/str_cat.h"
#include "google/protobuf/descriptor.h"
#include "proto/health.grpc.pb.h"
#include "proto/ps.grpc.pb.h"
#include "tests/grpc_fuzz/calls.h"

namespace ps {
namespace grpc_fuzz {
namespace {

using google::protobuf::MethodDescriptor;
using google::protobuf::ServiceDescriptor;

// Generators and weights of the RPCs that have their own: the
// tensor-carrying ones get the most cases.
struct Known {
  int weight;
  std::function<Request(CaseGen&, const Harness&, std::string*)> make;
};

const std::map<std::string, Known>& KnownRpcs() {
  static const auto* known = new std::map<std::string, Known>{
      {"Register", {8, [](CaseGen& g, const Harness&, std::string*) { return g.Register(); }}},
      {"InitParams", {8, [](CaseGen& g, const Harness&, std::string*) { return g.Init(); }}},
      {"Push", {22, [](CaseGen& g, const Harness&, std::string*) { return g.Push(); }}},
      {"Pull", {14, [](CaseGen& g, const Harness&, std::string*) { return g.Pull(); }}},
      {"PushPull", {18, [](CaseGen& g, const Harness&, std::string*) { return g.PushPull(); }}},
      {"PullRows", {10, [](CaseGen& g, const Harness&, std::string*) { return g.PullRows(); }}},
      {"PushRows", {12, [](CaseGen& g, const Harness&, std::string*) { return g.PushRows(); }}},
      {"GetStatus", {8, [](CaseGen& g, const Harness&, std::string*) { return g.Status(); }}},
      {"Checkpoint", {4, [](CaseGen& g, const Harness&, std::string*) { return g.Checkpoint(); }}},
      {"Stream",
       {2,
        [](CaseGen& g, const Harness& h, std::string*) {
          // One StreamRequest, then the client half-closes: the server must
          // end the stream even when that leaves the call incomplete. Only
          // pushes: a unary client reads one response, and leaving a pull's
          // weights (several messages) unread would stall the stream on
          // flow control.
          ProtoFuzzer& fz = g.fz();
          Request req;
          const bool complete = fz.Chance(0.5);
          req.what = complete ? "a push's only message" : "a push's first message";
          req.bytes = fz.Mutate(
              g.Call(1, v1::CALL_PUSH, g.Chunks({int(h.slices.size()) - 1}, false), complete)[0],
              0);
          if (fz.Chance(0.2)) {
            req.bytes = fz.NotProtobuf();
            req.what = "not protobuf";
          }
          return req;
        }}},
  };
  return *known;
}

// The int64 field `version` of `m`'s response, or 0.
int VersionField(const MethodDescriptor* m) {
  const google::protobuf::FieldDescriptor* f = m->output_type()->FindFieldByName("version");
  return f != nullptr && f->type() == google::protobuf::FieldDescriptor::TYPE_INT64 ? f->number()
                                                                                    : 0;
}

UnaryRpc FromDescriptor(const MethodDescriptor* m, const std::string& name) {
  UnaryRpc rpc;
  rpc.name = name;
  rpc.method = absl::StrCat("/", m->service()->full_name(), "/", m->name());
  rpc.unary = !m->client_streaming() && !m->server_streaming();
  rpc.version_field = VersionField(m);
  auto known = KnownRpcs().find(m->name());
  if (known != KnownRpcs().end() && m->service()->full_name() == "ps.v1.ParameterServer") {
    rpc.weight = known->second.weight;
    rpc.make = known->second.make;
  } else {
    const google::protobuf::Descriptor* input = m->input_type();
    rpc.make = [input](CaseGen& g, const Harness&, std::string*) { return g.Generic(input); };
  }
  return rpc;
}

std::vector<UnaryRpc> BuildUnaryRpcs() {
  const auto* pool = google::protobuf::DescriptorPool::generated_pool();
  const ServiceDescriptor* ps = pool->FindServiceByName(v1::ParameterServer::service_full_name());
  const ServiceDescriptor* health =
      pool->FindServiceByName(grpc::health::v1::Health::service_full_name());
  std::vector<UnaryRpc> out;
  for (int i = 0; i < ps->method_count(); ++i) {
    const MethodDescriptor* m = ps->method(i);
    const bool streaming = m->client_streaming() || m->server_streaming();
    out.push_back(FromDescriptor(m, streaming ? m->name() + " (as unary)" : m->name()));
  }
  // Health/Check only: Watch never ends, so it cannot be called as unary.
  UnaryRpc check = FromDescriptor(health->FindMethodByName("Check"), "Health.Check");
  check.make = [](CaseGen& g, const Harness&, std::string*) { return g.Health(); };
  out.push_back(std::move(check));
  UnaryRpc unknown;
  unknown.name = "(unknown method)";
  unknown.unary = false;
  unknown.weight = 2;
  unknown.make = [](CaseGen& g, const Harness&, std::string* method) {
    static const std::vector<std::string> kMethods = {
        "/ps.v1.ParameterServer/Nope", "/ps.v1.ParameterServer/", "/ps.v1.Other/Push",
        "/grpc.health.v1.Health/Nope", "/ps.v1.ParameterServer/Push/x"};
    Request req = g.Status();
    *method = g.fz().Pick(kMethods);
    return req;
  };
  out.push_back(std::move(unknown));
  return out;
}

// PullRows and PushRows answer OK, or the codes their contract names
// (server/core/sparse_tables.h, the service's checks), DEADLINE_EXCEEDED
// from the server for a wait that ran out (PullRowsRequest.min_version,
// PushPullRows in sync: "gave up after"); RESOURCE_EXHAUSTED also
// for a message over the receive limit, and INTERNAL or UNIMPLEMENTED (what
// gRPC answers when it cannot parse a request) only for fuzzed bytes. Anything else (UNKNOWN: an
// exception) is a finding.
void CheckRowsCode(Harness& h, const std::string& row, const Request& req, const grpc::Status& s,
                   bool we_cancelled, const std::string& what) {
  switch (s.error_code()) {
    case grpc::StatusCode::OK:
    case grpc::StatusCode::NOT_FOUND:
    case grpc::StatusCode::INVALID_ARGUMENT:
    case grpc::StatusCode::RESOURCE_EXHAUSTED:
    case grpc::StatusCode::FAILED_PRECONDITION:
      return;
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      if (s.error_message().find("gave up after") != std::string::npos) return;
      break;
    case grpc::StatusCode::CANCELLED:
      if (we_cancelled) return;
      break;
    case grpc::StatusCode::INTERNAL:
    case grpc::StatusCode::UNIMPLEMENTED:  // gRPC's answer to a request it cannot parse
      if (req.what.rfind("as is", 0) != 0) return;  // may not parse
      break;
    default:
      break;
  }
  if (ClientGaveUp(s)) return;  // Record's finding
  h.findings.Add(absl::StrCat(row, ": a code its contract does not name"),
                 absl::StrCat(row, " [", what, "]: ", Describe(s)));
}

}  // namespace

const std::vector<UnaryRpc>& UnaryRpcs() {
  static const auto* rpcs = new std::vector<UnaryRpc>(BuildUnaryRpcs());
  return *rpcs;
}

void UnaryCase(Harness& h, uint64_t seed, int index, bool before_init) {
  CaseGen g(&h, seed);
  ProtoFuzzer& fz = g.fz();
  const std::vector<UnaryRpc>& rpcs = UnaryRpcs();
  static const int kTotal = [&rpcs] {
    int total = 0;
    for (const UnaryRpc& rpc : rpcs) total += rpc.weight;
    return total;
  }();
  int w = fz.Uniform(kTotal);
  auto it = rpcs.begin();
  for (; w >= it->weight; ++it) w -= it->weight;
  if (before_init && it->name == "InitParams") {
    it = std::find_if(rpcs.begin(), rpcs.end(), [](const UnaryRpc& r) { return r.name == "Pull"; });
  }
  const UnaryRpc& rpc = *it;
  std::string method = rpc.method;
  Request req = rpc.make(g, h, &method);
  const absl::Duration cancel_after =
      fz.Chance(0.04) ? absl::Milliseconds(fz.Uniform(30)) : absl::InfiniteDuration();
  UnaryResult r = CallUnary(h.stub(index), method, req.bytes, cancel_after);
  ++h.unary_cases;
  ++h.messages;
  const std::string row = absl::StrCat("unary ", rpc.name);
  const std::string what =
      absl::StrCat(h.phase, " case ", index, ", ", req.what, ", ", req.bytes.size(), " bytes",
                   r.we_cancelled ? ", cancelled" : "");
  Record(h, row, r.status, r.we_cancelled, what);
  if (rpc.name == "PullRows" || rpc.name == "PushRows") {
    CheckRowsCode(h, row, req, r.status, r.we_cancelled, what);
  }
  if (req.clean_nonfinite && (rpc.name == "Push" || rpc.name == "PushRows") && r.status.ok()) {
    ++h.nonfinite_accepted;
    h.findings.Add("push with NaN/Inf gradient values accepted",
                   absl::StrCat(row, " [", what, "]"));
  }
  // The newest version, so that later cases can aim at it.
  if (r.status.ok() && rpc.version_field != 0) {
    if (auto v = VarintField(r.response, rpc.version_field)) {
      h.SawVersion(static_cast<int64_t>(*v));
    }
  }
}

}  // namespace grpc_fuzz
}  // namespace ps
