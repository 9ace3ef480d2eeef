#include "tests/grpc_fuzz/stream_cases.h"

#include <climits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/clock.h"
#include "tests/grpc_fuzz/calls.h"

namespace ps {
namespace grpc_fuzz {
namespace {

using grpc::StatusCode;

const char* KindName(int kind) {
  switch (kind) {
    case v1::CALL_PUSH:
      return "PUSH";
    case v1::CALL_PULL:
      return "PULL";
    case v1::CALL_PUSH_PULL:
      return "PUSH_PULL";
    default:
      return "bad kind";
  }
}

// Elements of the shard's flat buffer from element `from` of slice i to its
// end: what a span clamped at the buffer's end holds.
int64_t RestOfShard(const Harness& h, int i, int64_t from) {
  return h.total_elements - h.slices[i].flat_offset - from;
}

// Offsets and lengths at the edges of int64: each sequence is an invalid
// push of one slice (it never covers the slice with matching data).
std::vector<v1::TensorSlice> OverflowChunks(CaseGen& g, const Harness& h, int i) {
  constexpr int64_t kMax = INT64_MAX, kMin = INT64_MIN;
  const SliceInfo& x = h.slices[i];
  auto chunk = [&](int64_t offset, int64_t length, size_t data_bytes) {
    v1::TensorSlice c;
    c.set_name(x.name);
    for (int64_t d : x.shape) c.add_shape(d);
    c.set_offset(offset);
    c.set_length(length);
    c.set_data(std::string(data_bytes, '\0'));
    return c;
  };
  const int64_t end = x.offset + x.length;
  switch (g.fz().Uniform(10)) {
    case 0:  // the case that wedged a server
      return WrappingChunks(
          h, i, g.fz().Chance(0.5) ? 36 : 4 * std::min<int64_t>(RestOfShard(h, i, 1), 1 << 20));
    case 1:
      return {chunk(x.offset, kMax, 4)};
    case 2:
      return {chunk(x.offset, 1, 4), chunk(x.offset + 1, kMax, 8), chunk(kMin, kMax, 0)};
    case 3:
      return {chunk(end - 1, 2, 8)};
    case 4:
      return {chunk(-1, 1, 4)};
    case 5:
      return {chunk(x.offset, -1, 0)};
    case 6:
      return {chunk(x.offset, int64_t{1} << 62, 16)};  // 4 * length wraps to 0
    case 7:
      return {chunk(x.offset, (int64_t{1} << 62) + 1, 4)};  // 4 * length wraps to 4
    case 8:
      return {chunk(kMax, 1, 4)};
    default: {  // no progress: empty chunks
      std::vector<v1::TensorSlice> out(1 + g.fz().Uniform(200), chunk(x.offset, 0, 0));
      return out;
    }
  }
}

}  // namespace

void AddCall(CaseGen& g, StreamScript* s, uint64_t call_id, int kind,
             const std::vector<v1::StreamRequest>& msgs, double rate) {
  s->calls[call_id] = KindName(kind);
  for (const v1::StreamRequest& m : msgs) {
    std::string bytes = g.fz().Mutate(m, rate);
    s->clean = s->clean && !g.fz().changed();
    if (rate > 0 && g.fz().Chance(0.05)) {
      bytes = g.fz().Garble(std::move(bytes));
      s->clean = false;
    }
    s->messages.push_back(std::move(bytes));
  }
}

std::vector<int> AllSlices(const Harness& h) {
  std::vector<int> all(h.slices.size());
  for (size_t i = 0; i < all.size(); ++i) all[i] = static_cast<int>(i);
  return all;
}

std::vector<v1::TensorSlice> WrappingChunks(const Harness& h, int i, size_t data_bytes) {
  const SliceInfo& x = h.slices[i];
  std::vector<v1::TensorSlice> out(3);
  const int64_t offsets[] = {x.offset, x.offset + 1,
                             static_cast<int64_t>(uint64_t(x.offset) + 1 + uint64_t(INT64_MAX))};
  const int64_t lengths[] = {1, INT64_MAX, 0};
  const size_t bytes[] = {4, data_bytes, 0};
  for (int k = 0; k < 3; ++k) {
    out[k].set_name(x.name);
    for (int64_t d : x.shape) out[k].add_shape(d);
    out[k].set_offset(offsets[k]);
    out[k].set_length(lengths[k]);
    out[k].set_data(std::string(bytes[k], '\0'));
  }
  return out;
}

StreamScript RandomStreamScript(CaseGen& g, const Harness& h) {
  ProtoFuzzer& fz = g.fz();
  StreamScript s;
  static const std::vector<double> kRates = {0, 0, 0, 0.05, 0.05, 0.25};
  const double rate = fz.Pick(kRates);
  const int pick = fz.Uniform(100);
  auto push_chunks = [&](bool nonfinite) {
    return g.Chunks(fz.Chance(0.6) ? AllSlices(h) : g.PushSlices(), nonfinite);
  };
  if (pick < 40) {
    s.what = absl::StrCat("calls, mutation rate ", rate);
    s.complete_calls = true;
    uint64_t id = fz.Chance(0.9) ? 1 : fz.Pick(std::vector<uint64_t>{2, 1000, uint64_t{1} << 62});
    for (int n = 1 + fz.Uniform(3); n > 0; --n) {
      const int kind = fz.Chance(0.05) ? fz.Pick(std::vector<int>{3, -1, 7}) : fz.Uniform(3);
      const bool push = kind == v1::CALL_PUSH || kind == v1::CALL_PUSH_PULL;
      AddCall(g, &s, id, kind,
              g.Call(id, kind, push ? push_chunks(false) : std::vector<v1::TensorSlice>{}, true),
              rate);
      id += fz.Chance(0.9) ? 1 : 1 + fz.Uniform(1000);
    }
  } else if (pick < 48) {
    s.what = "messages that are not StreamRequests";
    s.clean = false;
    for (int n = 1 + fz.Uniform(3); n > 0; --n) {
      switch (fz.Uniform(4)) {
        case 0:
          s.messages.push_back(fz.NotProtobuf());
          break;
        case 1:
          s.messages.push_back(fz.Random(v1::StreamRequest::descriptor()));
          break;
        case 2:
          s.messages.push_back(fz.Garble(fz.Mutate(g.Header(1, fz.Uniform(3)), 0)));
          break;
        default:
          s.messages.push_back(g.Push().bytes);
          break;  // a PushRequest
      }
    }
  } else if (pick < 54) {
    s.what = "second call before the first's last message";
    AddCall(g, &s, 1, v1::CALL_PUSH, g.Call(1, v1::CALL_PUSH, push_chunks(false), false), rate);
    AddCall(g, &s, 2, v1::CALL_PULL, g.Call(2, v1::CALL_PULL, {}, true), rate);
  } else if (pick < 62) {
    static const std::vector<std::vector<uint64_t>> kIds = {
        {0}, {5, 3}, {7, 7}, {~uint64_t{0}, 1}, {1, ~uint64_t{0}, 2}, {2, 1, 0}};
    const std::vector<uint64_t>& ids = fz.Pick(kIds);
    s.what = absl::StrCat("call ids ", absl::StrJoin(ids, ","));
    for (uint64_t id : ids) {
      const int kind = fz.Uniform(3);
      const bool push = kind != v1::CALL_PULL;
      AddCall(g, &s, id, kind,
              g.Call(id, kind, push ? push_chunks(false) : std::vector<v1::TensorSlice>{}, true),
              rate);
    }
  } else if (pick < 68) {
    s.what = "half-closed mid-call";
    std::vector<v1::StreamRequest> msgs = g.Call(1, v1::CALL_PUSH, push_chunks(false), false);
    msgs.resize(1 + fz.Uniform(msgs.size()));
    AddCall(g, &s, 1, v1::CALL_PUSH, msgs, rate);
  } else if (pick < 71) {
    s.what = "push left silent mid-call";
    std::vector<v1::StreamRequest> msgs = g.Call(1, v1::CALL_PUSH_PULL, push_chunks(false), false);
    msgs.resize(1 + fz.Uniform(msgs.size()));
    AddCall(g, &s, 1, v1::CALL_PUSH_PULL, msgs, 0);
    s.end = StreamScript::End::kSilent;
    s.silent_call = 1;
  } else if (pick < 78) {
    s.what = "cancelled";
    const int kind = fz.Uniform(3);
    std::vector<v1::StreamRequest> msgs =
        g.Call(1, kind, kind == v1::CALL_PULL ? std::vector<v1::TensorSlice>{} : push_chunks(false),
               fz.Chance(0.5));
    if (kind == v1::CALL_PULL) msgs[0].set_min_version(int64_t{1} << 62);  // waits
    AddCall(g, &s, 1, kind, msgs, rate);
    s.end = StreamScript::End::kCancel;
    s.cancel_after = absl::Milliseconds(fz.Uniform(50));
  } else if (pick < 85) {
    const int i = fz.Uniform(h.slices.size());
    s.what = absl::StrCat("offsets/lengths at the int64 edges on ", h.slices[i].name);
    const int kind = fz.Chance(0.5) ? v1::CALL_PUSH : v1::CALL_PUSH_PULL;
    std::vector<v1::TensorSlice> chunks = OverflowChunks(g, h, i);
    std::vector<v1::StreamRequest> msgs = {g.Header(1, kind)};
    for (auto& c : chunks) {
      if (fz.Chance(0.5)) msgs.emplace_back().set_call_id(1);  // one chunk per message, or several
      *msgs.back().add_gradients() = std::move(c);
    }
    msgs.back().set_last(true);
    AddCall(g, &s, 1, kind, msgs, 0);
    s.must_fail = true;
  } else if (pick < 90) {
    s.what = "pull carrying gradients";
    AddCall(g, &s, 1, v1::CALL_PULL, g.Call(1, v1::CALL_PULL, push_chunks(false), true), rate);
  } else if (pick < 95) {
    s.what = "push with NaN/Inf gradient values";
    AddCall(g, &s, 1, v1::CALL_PUSH, g.Call(1, v1::CALL_PUSH, g.Chunks(AllSlices(h), true), true),
            0);
    s.must_fail = s.nonfinite = true;
  } else {
    s.what = "many small calls";
    uint64_t id = 1;
    for (int n = 10 + fz.Uniform(20); n > 0; --n, ++id) {
      const int kind = fz.Chance(0.9) ? v1::CALL_PUSH : v1::CALL_PULL;
      std::vector<v1::TensorSlice> chunks;
      if (kind == v1::CALL_PUSH) chunks = g.Chunks({fz.Uniform(h.slices.size())}, false);
      AddCall(g, &s, id, kind, g.Call(id, kind, chunks, true), rate);
    }
  }
  return s;
}

std::string RunStream(Harness& h, int index, const StreamScript& s) {
  ScriptedStream st(h.stub(index), kClientDeadline);
  int sent = 0;
  for (const std::string& m : s.messages) {
    if (!st.Write(m)) break;  // the server ended the stream
    ++sent;
  }
  h.messages += sent;
  ++h.stream_cases;
  std::string problem;
  bool we_cancelled = false;
  switch (s.end) {
    case StreamScript::End::kWritesDone:
      st.WritesDone();
      break;
    case StreamScript::End::kCancel:
      // Waits `cancel_after` (less if the server ends the stream first).
      st.WaitAnsweredOrEnded(~uint64_t{0}, absl::Now() + s.cancel_after);
      st.Cancel();
      we_cancelled = true;
      break;
    case StreamScript::End::kSilent:
      if (h.call_timeout) {
        // --call_timeout: the server must fail the silent call by itself.
        const absl::Duration bound = *h.call_timeout + absl::Seconds(5);
        if (!st.WaitAnsweredOrEnded(s.silent_call, absl::Now() + bound)) {
          problem = absl::StrCat("the server did not fail a call left silent mid-way within ",
                                 absl::FormatDuration(bound), " (--call_timeout + 5 s)");
          h.findings.Add("call left silent not failed within --call_timeout + 5 s",
                         absl::StrCat("stream [", h.phase, " case ", index, ", ", s.what, "]"));
        }
        st.WritesDone();
      } else {
        // No --call_timeout: waiting is right; give up after kSilentGiveUp.
        st.WaitAnsweredOrEnded(s.silent_call, absl::Now() + kSilentGiveUp);
        st.Cancel();
        we_cancelled = true;
      }
      break;
  }
  st.Release();
  // The context's deadline ends the call by kClientDeadline at the latest.
  std::optional<grpc::Status> status =
      st.WaitDone(absl::Now() + kClientDeadline + absl::Seconds(10));
  const grpc::Status end =
      status.value_or(grpc::Status(StatusCode::DEADLINE_EXCEEDED, "never ended"));
  const std::string what = absl::StrCat(h.phase, " case ", index, ", ", s.what, ", ", sent, "/",
                                        s.messages.size(), " messages sent");
  Record(h, "stream Stream (end)", end, we_cancelled, what);

  std::map<uint64_t, ScriptedStream::Answer> answers;
  for (const ScriptedStream::Answer& a : st.answers()) {
    if (a.code == 0) h.SawVersion(a.version);
    answers.emplace(a.call_id, a);  // the first answer of each call
    if (s.must_fail && a.code == 0) {
      if (s.nonfinite) ++h.nonfinite_accepted;
      problem = absl::StrCat("call ", a.call_id, ": an invalid push was accepted (version ",
                             a.version, ")");
      h.findings.Add(
          s.nonfinite ? "push with NaN/Inf gradient values accepted" : "invalid push accepted",
          absl::StrCat("stream [", what, "]: ", problem));
    }
  }
  for (const auto& [id, kind] : s.calls) {
    auto it = answers.find(id);
    h.tally.Add(
        absl::StrCat("stream call ", kind),
        it == answers.end() ? "no answer" : CodeName(static_cast<StatusCode>(it->second.code)),
        it == answers.end() ? "" : it->second.message.substr(0, 300));
    // Complete calls, sent as they are: once the stream ended OK, each must
    // have been answered.
    if (s.complete_calls && s.clean && end.ok() && it == answers.end()) {
      problem = absl::StrCat("call ", id, " got no answer, yet the stream ended OK");
      h.findings.Add("complete call not answered, yet the stream ended OK",
                     absl::StrCat("stream [", what, "]: ", problem));
    }
  }
  if (st.unparsable() > 0) {
    problem = absl::StrCat("the server sent ", st.unparsable(),
                           " StreamResponse(s) that do not parse: ", st.unparsable_why());
    h.findings.Add("StreamResponse that does not parse",
                   absl::StrCat("stream [", what, "]: ", problem));
  }
  if (problem.empty() && ClientGaveUp(end)) {
    problem = "no status from the server within the deadline";
  }
  return problem;
}

}  // namespace grpc_fuzz
}  // namespace ps
