// The requests of the gRPC fuzz test's cases: CaseGen makes a valid message
// of each type, aimed at the Harness's model with plausible and now and then
// extreme field values, then has the ProtoFuzzer (tests/proto_fuzzer.h)
// encode it as it is, mutated, garbled, random, or replaced by bytes that are
// no protobuf. One CaseGen per case (it holds the case's random generator);
// not thread-safe.
#ifndef PS_TESTS_GRPC_FUZZ_CASE_GEN_H_
#define PS_TESTS_GRPC_FUZZ_CASE_GEN_H_

#include <algorithm>
#include <climits>
#include <cstdint>
#include <cstring>
#include <string>
#include <vector>

#include "google/protobuf/descriptor.h"
#include "google/protobuf/message.h"
#include "proto/health.pb.h"
#include "proto/ps.pb.h"
#include "tests/grpc_fuzz/harness.h"
#include "tests/proto_fuzzer.h"

namespace ps {
namespace grpc_fuzz {

struct Request {
  std::string bytes;
  std::string what;              // how it was made, for the findings
  bool clean_nonfinite = false;  // valid but for NaN/Inf gradient values
};

class CaseGen {
 public:
  CaseGen(Harness* h, uint64_t seed) : h_(h), fz_(seed, &h->hints) {}

  ProtoFuzzer& fz() { return fz_; }

  // ---- Plausible field values, with the odd extreme one.

  int Worker() {
    if (fz_.Chance(0.85)) return fz_.Uniform(h_->num_workers);
    static const std::vector<int> kOdd = {-1, 2, 3, 100, INT32_MAX, INT32_MIN};
    return fz_.Pick(kOdd);
  }

  int64_t Version() {
    const int64_t v = h_->version.load();
    switch (fz_.Uniform(10)) {
      case 0:
        return v - 1;
      case 1:
        return v + 1;
      case 2:
        return fz_.ExtremeInt64();
      default:
        return v;
    }
  }

  int64_t MinVersion() {
    const int64_t v = h_->version.load();
    switch (fz_.Uniform(10)) {
      case 0:
      case 1:
        return 0;
      case 2:
      case 3:
        return v;
      case 4:
      case 5:
        return v + 1;
      case 6:
        return v + 2;
      case 7:
        return int64_t{1} << 62;
      default:
        return fz_.ExtremeInt64();
    }
  }

  int64_t WaitMs() {
    static const std::vector<int64_t> kPool = {
        0, 0, 0, 1, 10, 100, 500, 2000, 5000, -1, INT64_MAX, INT64_MIN, int64_t{1} << 62};
    return fz_.Pick(kPool);
  }

  // ---- Valid messages.

  // Slice i's data (small values); with `nonfinite`, NaN or +-Inf planted.
  std::string Data(int i, int64_t from, int64_t n, bool nonfinite) {
    std::string d = h_->grad_data[i].substr(4 * from, 4 * n);
    if (nonfinite && n > 0) {
      static const std::vector<uint32_t> kBits = {0x7fc00000u, 0xffc00000u, 0x7f800000u,
                                                  0xff800000u, 0x7f800001u};
      for (int k = 1 + fz_.Uniform(3); k > 0; --k) {
        const uint32_t bits = fz_.Pick(kBits);
        std::memcpy(&d[4 * fz_.Uniform(n)], &bits, 4);
      }
    }
    return d;
  }

  void FillSlice(int i, int64_t from, int64_t n, bool nonfinite, v1::TensorSlice* s) {
    const SliceInfo& x = h_->slices[i];
    s->set_name(x.name);
    for (int64_t d : x.shape) s->add_shape(d);
    s->set_offset(x.offset + from);
    s->set_length(n);
    s->set_data(Data(i, from, n, nonfinite));
  }

  // Indices of the slices a push carries: all of them (a valid push), a few
  // small ones, all but one, or none.
  std::vector<int> PushSlices() {
    const int n = static_cast<int>(h_->slices.size());
    std::vector<int> all(n);
    for (int i = 0; i < n; ++i) all[i] = i;
    switch (fz_.Uniform(10)) {
      case 0:
      case 1:
      case 2:
      case 3:
        return all;
      case 4:
        all.erase(all.begin() + fz_.Uniform(n));
        return all;
      case 5:
        return {};
      default: {  // 1-3 small slices (the biases), possibly twice
        std::vector<int> small, out;
        for (int i = 0; i < n; ++i) {
          if (h_->slices[i].length <= 1024) small.push_back(i);
        }
        if (small.empty()) small = all;
        for (int k = 1 + fz_.Uniform(3); k > 0; --k) out.push_back(fz_.Pick(small));
        return out;
      }
    }
  }

  v1::PushRequest PushTemplate(bool* nonfinite) {
    v1::PushRequest p;
    p.set_worker_id(Worker());
    p.set_version(Version());
    std::vector<int> which = PushSlices();
    *nonfinite = !which.empty() && fz_.Chance(0.15);
    const int poisoned = which.empty() ? -1 : fz_.Uniform(which.size());
    for (size_t k = 0; k < which.size(); ++k) {
      const int i = which[k];
      FillSlice(i, 0, h_->slices[i].length, *nonfinite && int(k) == poisoned, p.add_gradients());
    }
    return p;
  }

  // `valid` as it is (25%), mutated at a low or higher rate, random, garbled,
  // or not protobuf at all.
  Request Encode(const google::protobuf::Message& valid, bool nonfinite) {
    Request r;
    const int pick = fz_.Uniform(100);
    if (pick < 25) {
      r.bytes = fz_.Mutate(valid, 0);
      r.what = "as is";
    } else if (pick < 60) {
      r.bytes = fz_.Mutate(valid, 0.05);
      r.what = fz_.changed() ? "mutated 5%" : "as is (5% changed nothing)";
    } else if (pick < 80) {
      r.bytes = fz_.Mutate(valid, 0.25);
      r.what = "mutated 25%";
    } else if (pick < 88) {
      r.bytes = fz_.Random(valid.GetDescriptor());
      r.what = "random";
    } else if (pick < 95) {
      r.bytes = fz_.Garble(fz_.Mutate(valid, 0.05));
      r.what = "garbled";
    } else {
      r.bytes = fz_.NotProtobuf();
      r.what = "not protobuf";
    }
    r.clean_nonfinite = nonfinite && pick < 60 && !fz_.changed();
    if (nonfinite) r.what += ", NaN/Inf data";
    return r;
  }

  // A message of type `d` for an RPC without a generator of its own (a new
  // one): its worker_id (if any) plausible, its integer fields with hints
  // set from them, the rest empty; then encoded as the others.
  Request Generic(const google::protobuf::Descriptor* d);

  Request Register() {
    v1::RegisterRequest m;
    m.set_worker_id(Worker());
    m.set_num_workers(fz_.Chance(0.8) ? h_->num_workers : fz_.Uniform(4));
    return Encode(m, false);
  }

  Request Init() {
    v1::InitRequest m;
    m.set_worker_id(Worker());
    *m.mutable_spec() = h_->spec;
    if (fz_.Chance(0.3)) {
      // The declared tables (a match), or one of them changed (refused).
      for (const FuzzTable& t : kTables) {
        v1::TableSpec* p = m.mutable_spec()->add_tables();
        p->set_name(t.name);
        p->set_dim(t.dim);
      }
      if (fz_.Chance(0.5)) {
        m.mutable_spec()->mutable_tables(fz_.Uniform(2))->set_dim(
            static_cast<int32_t>(fz_.ExtremeInt64()));
      }
    }
    if (fz_.Chance(0.3) && m.spec().tensors_size() > 0) {
      // A spec that differs in one dimension.
      auto* t = m.mutable_spec()->mutable_tensors(fz_.Uniform(m.spec().tensors_size()));
      if (t->shape_size() > 0) t->set_shape(fz_.Uniform(t->shape_size()), fz_.ExtremeInt64());
    }
    if (m.worker_id() == 0 && fz_.Chance(0.5)) {
      for (int i : PushSlices()) FillSlice(i, 0, h_->slices[i].length, false, m.add_values());
    }
    m.set_wait_timeout_ms(WaitMs());
    return Encode(m, false);
  }

  Request Push() {
    bool nonfinite;
    v1::PushRequest m = PushTemplate(&nonfinite);
    return Encode(m, nonfinite);
  }

  Request Pull() {
    v1::PullRequest m;
    m.set_worker_id(Worker());
    m.set_min_version(MinVersion());
    m.set_wait_timeout_ms(WaitMs());
    return Encode(m, false);
  }

  Request PushPull() {
    bool nonfinite;
    v1::PushPullRequest m;
    *m.mutable_push() = PushTemplate(&nonfinite);
    m.set_min_version(MinVersion());
    m.set_wait_timeout_ms(WaitMs());
    return Encode(m, nonfinite);
  }

  // ---- Embedding rows: the tables of kTables now and then another name;
  // id counts around --max_ids_per_request; ids from a small range (so
  // that tables fill to --max_rows), a wide one, or the extremes, now and
  // then repeated; gradients of the table's width or not.

  std::string Table() {
    if (fz_.Chance(0.85)) return kTables[fz_.Uniform(2)].name;
    static const std::vector<std::string> kOdd = {"", "nope", "emb ", std::string("emb\0", 4),
                                                  std::string(300, 't')};
    return fz_.Pick(kOdd);
  }

  static int DimOf(const std::string& table) {
    for (const FuzzTable& t : kTables) {
      if (table == t.name) return t.dim;
    }
    return 4;
  }

  std::vector<uint64_t> RowIds() {
    static const std::vector<int> kCounts = {0,  1,  2,  3,  5,  8,  16, kMaxIdsPerRequest - 1,
                                             kMaxIdsPerRequest,  kMaxIdsPerRequest + 1,
                                             2 * kMaxIdsPerRequest,  kMaxRows + 1, 1000};
    const int n = fz_.Pick(kCounts);
    const uint64_t span = fz_.Chance(0.7) ? 2 * kMaxRows : uint64_t{1} << 40;
    std::vector<uint64_t> ids;
    for (int i = 0; i < n; ++i) {
      if (fz_.Chance(0.02)) {
        static const std::vector<uint64_t> kExtreme = {0, UINT64_MAX, uint64_t{1} << 63,
                                                       (uint64_t{1} << 63) - 1};
        ids.push_back(fz_.Pick(kExtreme));
      } else if (!ids.empty() && fz_.Chance(0.03)) {
        ids.push_back(fz_.Pick(ids));  // a repeat
      } else {
        ids.push_back(fz_.rng()() % span);
      }
    }
    return ids;
  }

  Request PullRows() {
    v1::PullRowsRequest m;
    m.set_worker_id(Worker());
    m.set_table(Table());
    for (uint64_t id : RowIds()) m.add_ids(id);
    return Encode(m, false);
  }

  Request PushRows() {
    v1::PushRowsRequest m;
    m.set_worker_id(Worker());
    m.set_table(Table());
    for (uint64_t id : RowIds()) m.add_ids(id);
    // Small values (|x| <= 1e-4), so that accepted gradients leave the rows
    // finite; NaN/Inf planted, or a size that is not ids * dim.
    int64_t n = int64_t{m.ids_size()} * DimOf(m.table());
    switch (fz_.Uniform(20)) {
      case 0: n += 1; break;
      case 1: n = std::max<int64_t>(0, n - 1); break;
      case 2: n = 0; break;
      case 3: n += 1 << 18; break;  // 1 MiB more
      default: break;
    }
    std::string grads(4 * n, '\0');
    for (int64_t i = 0; i < n; ++i) {
      const float f = 1e-4f * (static_cast<float>(fz_.Uniform(2001)) / 1000.0f - 1.0f);
      std::memcpy(&grads[4 * i], &f, 4);
    }
    const bool nonfinite = n > 0 && fz_.Chance(0.1);
    if (nonfinite) {
      static const std::vector<uint32_t> kBits = {0x7fc00000u, 0x7f800000u, 0xff800000u};
      const uint32_t bits = fz_.Pick(kBits);
      std::memcpy(&grads[4 * fz_.Uniform(static_cast<int>(std::min<int64_t>(n, INT_MAX)))], &bits,
                  4);
    }
    if (fz_.Chance(0.05)) grads.append(1 + fz_.Uniform(3), '\x7f');  // not whole floats
    m.set_grads(std::move(grads));
    m.set_version(Version());
    static const std::vector<int64_t> kSeqs = {0, 0, 1, 2, 3, 1000, -1, INT64_MAX, INT64_MIN};
    m.set_seq(fz_.Chance(0.5) ? static_cast<int64_t>(fz_.rng()() % 100000) : fz_.Pick(kSeqs));
    return Encode(m, nonfinite);
  }

  Request Status() { return Encode(v1::StatusRequest(), false); }
  Request Checkpoint() { return Encode(v1::CheckpointRequest(), false); }

  Request Health() {
    grpc::health::v1::HealthCheckRequest m;
    static const std::vector<std::string> kServices = {"", "", "ps.v1.ParameterServer",
                                                       "grpc.health.v1.Health", "nope"};
    m.set_service(fz_.Pick(kServices));
    return Encode(m, false);
  }

  // ---- Stream calls.

  // The first message of a call: its header.
  v1::StreamRequest Header(uint64_t call_id, int kind) {
    v1::StreamRequest m;
    m.set_call_id(call_id);
    m.set_kind(static_cast<v1::CallKind>(kind));
    m.set_worker_id(Worker());
    m.set_version(Version());
    m.set_min_version(kind == v1::CALL_PUSH_PULL && fz_.Chance(0.5) ? h_->version.load() + 1
                                                                    : MinVersion());
    m.set_wait_timeout_ms(WaitMs());
    return m;
  }

  // Chunks covering slices `which` in order (each slice cut into at most 32
  // sub-ranges), the way a worker sends a push.
  std::vector<v1::TensorSlice> Chunks(const std::vector<int>& which, bool nonfinite) {
    std::vector<v1::TensorSlice> out;
    static const std::vector<int64_t> kSizes = {INT64_MAX, 1 << 18, 1 << 16, 4096, 1000, 1};
    const int poisoned = which.empty() ? -1 : fz_.Uniform(which.size());
    for (size_t k = 0; k < which.size(); ++k) {
      const int i = which[k];
      const int64_t len = h_->slices[i].length;
      const int64_t size = std::max(std::min(fz_.Pick(kSizes), len), (len + 31) / 32);
      const int first = static_cast<int>(out.size());
      for (int64_t at = 0; at < len; at += size) {
        FillSlice(i, at, std::min(size, len - at), false, &out.emplace_back());
      }
      if (nonfinite && int(k) == poisoned) {
        v1::TensorSlice& c = out[first + fz_.Uniform(out.size() - first)];
        const int64_t from = c.offset() - h_->slices[i].offset;
        c.set_data(Data(i, from, c.length(), true));
      }
    }
    return out;
  }

  // The messages of one call: the header first, `chunks` spread over 1-4 per
  // message, `last` on the final one if `complete`.
  std::vector<v1::StreamRequest> Call(uint64_t call_id, int kind,
                                      std::vector<v1::TensorSlice> chunks, bool complete) {
    std::vector<v1::StreamRequest> msgs = {Header(call_id, kind)};
    size_t per = 1 + fz_.Uniform(4);
    for (size_t i = 0; i < chunks.size(); ++i) {
      if (msgs.back().gradients_size() >= int(per)) {
        msgs.emplace_back().set_call_id(call_id);
        per = 1 + fz_.Uniform(4);
      }
      *msgs.back().add_gradients() = std::move(chunks[i]);
    }
    if (complete) msgs.back().set_last(true);
    return msgs;
  }

 private:
  Harness* const h_;
  ProtoFuzzer fz_;
};

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_CASE_GEN_H_
