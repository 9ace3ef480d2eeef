#include "tests/grpc_fuzz/named_cases.h"

#include <climits>

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "common/testing/wait_until.h"
#include "proto/ps.pb.h"
#include "tests/grpc_fuzz/calls.h"
#include "tests/grpc_fuzz/stream_cases.h"
#include "tests/grpc_fuzz/unary_cases.h"
#include "tests/proto_fuzzer.h"

namespace ps {
namespace grpc_fuzz {
namespace {

using grpc::StatusCode;

constexpr char kPush[] = "/ps.v1.ParameterServer/Push";
constexpr char kPull[] = "/ps.v1.ParameterServer/Pull";
constexpr char kPushPull[] = "/ps.v1.ParameterServer/PushPull";
constexpr char kInitParams[] = "/ps.v1.ParameterServer/InitParams";
constexpr char kGetStatus[] = "/ps.v1.ParameterServer/GetStatus";
constexpr char kPullRows[] = "/ps.v1.ParameterServer/PullRows";
constexpr char kPushRows[] = "/ps.v1.ParameterServer/PushRows";

std::string ExpectRefused(Harness& h, const std::string& row, const std::string& method,
                          const std::string& bytes) {
  UnaryResult r = CallUnary(h.stub(0), method, bytes);
  ++h.unary_cases;
  ++h.messages;
  Record(h, row, r.status, false, h.phase);
  if (ClientGaveUp(r.status)) return "no status from the server within the deadline";
  if (r.status.ok()) return "accepted";
  return "";
}

// A call that must get exactly `code` with a message holding each of `says`.
std::string ExpectCode(Harness& h, const std::string& row, const std::string& method,
                       const std::string& bytes, StatusCode code,
                       const std::vector<std::string>& says) {
  UnaryResult r = CallUnary(h.stub(0), method, bytes);
  ++h.unary_cases;
  ++h.messages;
  Record(h, row, r.status, false, h.phase);
  if (r.status.error_code() != code) return Describe(r.status);
  for (const std::string& s : says) {
    if (r.status.error_message().find(s) == std::string::npos) {
      return absl::StrCat(Describe(r.status), " (does not say \"", s, "\")");
    }
  }
  return "";
}

v1::PullRowsRequest RowsPull(const std::string& table, uint64_t first, int n) {
  v1::PullRowsRequest m;
  m.set_table(table);
  for (int i = 0; i < n; ++i) m.add_ids(first + i);
  return m;
}

int SliceIndex(const Harness& h, const std::string& name) {
  for (size_t i = 0; i < h.slices.size(); ++i) {
    if (h.slices[i].name == name) return static_cast<int>(i);
  }
  return 0;
}

}  // namespace

std::vector<NamedCase> NamedCases() {
  std::vector<NamedCase> cases;
  auto stream_case = [](std::string what,
                        std::function<void(Harness&, CaseGen&, StreamScript*)> build) {
    return NamedCase{what, [what, build](Harness& h, CaseGen& g) {
                       StreamScript s;
                       s.what = what;
                       build(h, g, &s);
                       return RunStream(h, 0, s);
                     }};
  };
  // One chunk per message, as the case was first seen: on fc1.bias with 36
  // bytes, and on the last slice with 36 bytes = what is left of the shard's
  // buffer after its element 1 (fc3.bias: 9 floats).
  for (bool last_slice : {false, true}) {
    cases.push_back(stream_case(
        absl::StrCat("stream push on ", last_slice ? "the last slice" : "fc1.bias",
                     " with chunks (0,1), (1,2^63-1, 36 bytes), (wrapped offset,0), last"),
        [last_slice](Harness& h, CaseGen& g, StreamScript* s) {
          const int i = last_slice ? int(h.slices.size()) - 1 : SliceIndex(h, "fc1.bias");
          std::vector<v1::StreamRequest> msgs = {g.Header(1, v1::CALL_PUSH)};
          msgs[0].set_worker_id(0);
          msgs[0].set_version(h.version.load());
          for (v1::TensorSlice& c : WrappingChunks(h, i, 36)) {
            v1::StreamRequest& m = msgs.emplace_back();
            m.set_call_id(1);
            *m.add_gradients() = std::move(c);
          }
          msgs.back().set_last(true);
          AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
          s->must_fail = true;
        }));
  }
  cases.push_back(stream_case("stream half-closed (WritesDone) in the middle of a push",
                              [](Harness& h, CaseGen& g, StreamScript* s) {
                                std::vector<v1::StreamRequest> msgs =
                                    g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), false), false);
                                msgs.resize(1);
                                AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
                              }));
  cases.push_back(stream_case(
      "stream: a second call before the first's last message",
      [](Harness& h, CaseGen& g, StreamScript* s) {
        AddCall(g, s, 1, v1::CALL_PUSH, g.Call(1, v1::CALL_PUSH, g.Chunks({0}, false), false), 0);
        AddCall(g, s, 2, v1::CALL_PULL, g.Call(2, v1::CALL_PULL, {}, true), 0);
      }));
  cases.push_back(stream_case("stream: call_id 0", [](Harness&, CaseGen& g, StreamScript* s) {
    AddCall(g, s, 0, v1::CALL_PULL, g.Call(0, v1::CALL_PULL, {}, true), 0);
  }));
  cases.push_back(
      stream_case("stream: call ids 5, then 3", [](Harness&, CaseGen& g, StreamScript* s) {
        AddCall(g, s, 5, v1::CALL_PULL, g.Call(5, v1::CALL_PULL, {}, true), 0);
        AddCall(g, s, 3, v1::CALL_PULL, g.Call(3, v1::CALL_PULL, {}, true), 0);
      }));
  cases.push_back(stream_case("stream push with NaN/Inf gradient values",
                              [](Harness& h, CaseGen& g, StreamScript* s) {
                                std::vector<v1::StreamRequest> msgs =
                                    g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), true), true);
                                msgs[0].set_worker_id(0);
                                msgs[0].set_version(h.version.load());
                                AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
                                s->must_fail = s->nonfinite = true;
                              }));
  cases.push_back(
      stream_case("stream push left silent mid-call", [](Harness& h, CaseGen& g, StreamScript* s) {
        std::vector<v1::StreamRequest> msgs =
            g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), false), false);
        msgs.resize(1);
        AddCall(g, s, 1, v1::CALL_PUSH, msgs, 0);
        s->end = StreamScript::End::kSilent;
        s->silent_call = 1;
      }));
  cases.push_back({"unary Push with NaN/Inf gradient values", [](Harness& h, CaseGen& g) {
                     v1::PushRequest p;
                     // Sync: not worker 0, whose stream push above may be pending.
                     p.set_worker_id(h.num_workers - 1);
                     p.set_version(h.version.load());
                     for (size_t i = 0; i < h.slices.size(); ++i) {
                       g.FillSlice(i, 0, h.slices[i].length, i == 1, p.add_gradients());
                     }
                     std::string problem =
                         ExpectRefused(h, "unary Push", kPush, p.SerializeAsString());
                     if (problem == "accepted") ++h.nonfinite_accepted;
                     return problem;
                   }});
  cases.push_back(
      {"unary Push with a slice at offset 1, length 2^63-1, 36 bytes", [](Harness& h, CaseGen& g) {
         v1::PushRequest p;
         p.set_version(h.version.load());
         for (size_t i = 0; i < h.slices.size(); ++i) {
           g.FillSlice(i, 0, h.slices[i].length, false, p.add_gradients());
         }
         v1::TensorSlice* s = p.mutable_gradients(SliceIndex(h, "fc1.bias"));
         s->set_offset(1);
         s->set_length(INT64_MAX);
         s->set_data(std::string(36, '\0'));
         return ExpectRefused(h, "unary Push", kPush, p.SerializeAsString());
       }});
  cases.push_back({"unary PushPull whose data claims 2^63-1 bytes", [](Harness& h, CaseGen&) {
                     std::string slice;
                     AppendLengthDelimited(1, "fc3.bias", &slice);
                     AppendTag(5, kWireLen, &slice);
                     AppendVarint(uint64_t(INT64_MAX), &slice);
                     slice += std::string(40, '\0');
                     std::string push;
                     AppendLengthDelimited(3, slice, &push);
                     std::string req;
                     AppendLengthDelimited(1, push, &req);
                     return ExpectRefused(h, "unary PushPull", kPushPull, req);
                   }});
  cases.push_back(
      {"unary InitParams with a spec whose element count wraps to 0", [](Harness& h, CaseGen&) {
         v1::InitRequest m;
         auto* t = m.mutable_spec()->add_tensors();
         t->set_name("w");
         t->add_shape(int64_t{1} << 32);
         t->add_shape(int64_t{1} << 32);
         return ExpectRefused(h, "unary InitParams", kInitParams, m.SerializeAsString());
       }});
  cases.push_back({"not protobuf, to every unary method", [](Harness& h, CaseGen& g) {
                     // Every unary method of the service descriptor, and Health/Check.
                     for (const UnaryRpc& rpc : UnaryRpcs()) {
                       if (!rpc.unary) continue;
                       std::string problem = ExpectRefused(h, absl::StrCat("unary ", rpc.name),
                                                           rpc.method, g.fz().NotProtobuf());
                       if (!problem.empty()) return absl::StrCat(rpc.method, ": ", problem);
                     }
                     return std::string();
                   }});
  cases.push_back(
      {"unary Pull for version 2^62: the server's DEADLINE_EXCEEDED within --pull_timeout",
       [](Harness& h, CaseGen&) {
         v1::PullRequest p;
         p.set_min_version(int64_t{1} << 62);
         UnaryResult r = CallUnary(h.stub(0), kPull, p.SerializeAsString());
         ++h.unary_cases;
         ++h.messages;
         Record(h, "unary Pull", r.status, false, h.phase);
         if (r.status.error_code() != StatusCode::DEADLINE_EXCEEDED || ClientGaveUp(r.status)) {
           return Describe(r.status);
         }
         if (r.took > absl::Seconds(kPullTimeoutS + 3)) {
           return absl::StrCat("took ", absl::FormatDuration(r.took));
         }
         return std::string();
       }});
  cases.push_back(
      {"cancelled waiting pulls (unary and stream) stop waiting on the server",
       [](Harness& h, CaseGen& g) {
         v1::PullRequest p;
         p.set_min_version(int64_t{1} << 62);
         p.set_wait_timeout_ms(60000);  // the server clamps it to --pull_timeout
         UnaryResult r =
             CallUnary(h.stub(0), kPull, p.SerializeAsString(), absl::Milliseconds(100));
         ++h.unary_cases;
         ++h.messages;
         Record(h, "unary Pull", r.status, r.we_cancelled, h.phase);
         StreamScript s;
         s.what = "cancelled waiting pull";
         std::vector<v1::StreamRequest> msgs = g.Call(1, v1::CALL_PULL, {}, true);
         msgs[0].set_worker_id(0);
         msgs[0].set_min_version(int64_t{1} << 62);
         AddCall(g, &s, 1, v1::CALL_PULL, msgs, 0);
         s.end = StreamScript::End::kCancel;
         s.cancel_after = absl::Milliseconds(100);
         const absl::Time cancelled = absl::Now();
         std::string problem = RunStream(h, 0, s);
         if (!problem.empty()) return problem;
         // Both waits would end by themselves after --pull_timeout;
         // cancelled, they must be gone well before.
         const absl::Status gone = WaitUntil(
             [&] {
               UnaryResult st = CallUnary(h.stub(0), kGetStatus, "");
               v1::StatusResponse resp;
               return st.status.ok() && resp.ParseFromString(st.response) &&
                      resp.waiting_calls() == 0;
             },
             cancelled + absl::Seconds(1) - absl::Now(), "no waiting calls",
             absl::Milliseconds(50));
         return gone.ok() ? std::string() : "waiting_calls still > 0 1 s after the cancels";
       }});
  // Embedding rows (the tables DeclareTables declared).
  for (const char* call : {"PushRows", "PushPullRows"}) {
    cases.push_back(
        {absl::StrCat("unary ", call, " whose ids claim 2^30 ids (8 GiB) in a short message"),
         [call](Harness& h, CaseGen&) {
           std::string bytes;
           AppendLengthDelimited(2, "emb", &bytes);
           AppendTag(3, kWireLen, &bytes);
           AppendVarint(uint64_t{8} << 30, &bytes);
           bytes += std::string(64, '\0');
           return ExpectRefused(h, absl::StrCat("unary ", call),
                                absl::StrCat("/ps.v1.ParameterServer/", call), bytes);
         }});
  }
  cases.push_back({"unary PullRows and PushRows past --max_ids_per_request",
                   [](Harness& h, CaseGen&) {
                     const int n = kMaxIdsPerRequest + 1;
                     std::string problem = ExpectCode(
                         h, "unary PullRows", kPullRows, RowsPull("emb", 0, n).SerializeAsString(),
                         StatusCode::INVALID_ARGUMENT, {"\"emb\"", "--max_ids_per_request"});
                     if (!problem.empty()) return problem;
                     v1::PushRowsRequest p;
                     p.set_table("wide");
                     for (int i = 0; i < n; ++i) p.add_ids(i);
                     p.set_grads(std::string(size_t{4} * n * 64, '\0'));
                     p.set_version(h.version.load());
                     return ExpectCode(h, "unary PushRows", kPushRows, p.SerializeAsString(),
                                       StatusCode::INVALID_ARGUMENT,
                                       {"\"wide\"", "--max_ids_per_request"});
                   }});
  cases.push_back({"unary PullRows past --max_rows: RESOURCE_EXHAUSTED naming the table",
                   [](Harness& h, CaseGen&) {
                     // "wide" filled with ids 0..kMaxRows-1, then one more.
                     for (int first = 0; first < kMaxRows; first += kMaxIdsPerRequest) {
                       UnaryResult r = CallUnary(
                           h.stub(0), kPullRows,
                           RowsPull("wide", first, kMaxIdsPerRequest).SerializeAsString());
                       ++h.unary_cases;
                       ++h.messages;
                       Record(h, "unary PullRows", r.status, false, h.phase);
                       if (!r.status.ok()) return Describe(r.status);
                     }
                     return ExpectCode(h, "unary PullRows", kPullRows,
                                       RowsPull("wide", kMaxRows, 1).SerializeAsString(),
                                       StatusCode::RESOURCE_EXHAUSTED,
                                       {"\"wide\"", absl::StrCat("max_rows ", kMaxRows)});
                   }});
  cases.push_back({"unary PullRows of a table that does not exist: NOT_FOUND naming it",
                   [](Harness& h, CaseGen&) {
                     return ExpectCode(h, "unary PullRows", kPullRows,
                                       RowsPull("nope", 0, 1).SerializeAsString(),
                                       StatusCode::NOT_FOUND, {"\"nope\" does not exist"});
                   }});
  return cases;
}

}  // namespace grpc_fuzz
}  // namespace ps
