// libFuzzer target for everything that reads bytes from the network before
// any other check: the wire decoders of rpc/raw_wire.h, the SliceAssembler
// that the decoded slices go through, and ValidateModelSpec with the
// partition it guards. The input format is in tests/fuzz/fuzz_input.h.
//
// What must hold for every input, besides no crash, leak or undefined
// behaviour under the sanitizers:
//   - a decoder returns OK or INVALID_ARGUMENT, and the same status and the
//     same decoded values whether the message comes in one piece or cut
//     into several (each piece is its own allocation, so reading past the
//     end of a piece is caught by ASan);
//   - the assembler (reject_nonfinite on) returns OK, INVALID_ARGUMENT or
//     RESOURCE_EXHAUSTED; asks only for destinations inside the layout;
//     Validate agrees with Add + Finish unless a chunk holds NaN or Inf; and
//     an OK Finish means every element of the buffer was written;
//   - ValidateModelSpec returns OK, INVALID_ARGUMENT or RESOURCE_EXHAUSTED,
//     and a spec it accepts is within its limits and partitions into ranges
//     that cover each tensor exactly once;
//   - the embedding-row requests and table specs keep the properties that
//     tests/fuzz/rows_fuzz.h lists.
//
// Built by tests/fuzz/run_fuzz.sh (clang, libFuzzer) and, without libFuzzer,
// by //tests/fuzz:wire_fuzz_corpus_test, which replays the seed corpus.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/string_view.h"
#include "common/model_spec.h"
#include "common/partition.h"
#include "common/bf16.h"
#include "common/slice_assembler.h"
#include "rpc/raw_wire.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/fuzz_input.h"
#include "tests/fuzz/rows_fuzz.h"

namespace ps {
namespace fuzz {
namespace {

// A quiet NaN with a payload no float arithmetic produces: the buffer is
// filled with it before assembly, and none may be left after an OK Finish.
constexpr uint32_t kSentinelBits = 0x7fc0dead;

// A message as separately allocated pieces: the whole message as one piece,
// or cut at the input's cut points.
class PieceStore {
 public:
  Pieces Add(absl::string_view message, const std::vector<size_t>& cuts) {
    Pieces pieces;
    size_t begin = 0;
    for (size_t end : cuts) {
      pieces.push_back(Copy(message.substr(begin, end - begin)));
      begin = end;
    }
    pieces.push_back(Copy(message.substr(begin)));
    return pieces;
  }

 private:
  absl::string_view Copy(absl::string_view bytes) {
    storage_.emplace_back(new char[bytes.size()]);
    if (!bytes.empty()) std::memcpy(storage_.back().get(), bytes.data(), bytes.size());
    return absl::string_view(storage_.back().get(), bytes.size());
  }
  std::vector<std::unique_ptr<char[]>> storage_;
};

void CheckDecodeStatus(const absl::Status& s) {
  FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument);
}

void CheckAssemblyStatus(const absl::Status& s) {
  FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
             s.code() == absl::StatusCode::kResourceExhausted);
}

// Everything decoded, as text, to compare the whole and the cut decodings.
std::string Describe(const RawTensorSlice& t) {
  return absl::StrCat("{", t.name, " [", absl::StrJoin(t.shape, ","), "] ", t.offset, "+",
                      t.length, " dtype ", static_cast<int32_t>(t.dtype), " ",
                      absl::StrJoin(t.data, ""), "}");
}
std::string Describe(const std::vector<RawTensorSlice>& slices) {
  std::string out;
  for (const RawTensorSlice& t : slices) out += Describe(t);
  return out;
}
std::string Describe(const RawPull& p) {
  return absl::StrCat(p.worker_id, " ", p.min_version, " ", p.wait_timeout_ms, " ",
                      static_cast<int32_t>(p.weights_dtype));
}
std::string Describe(const RawPush& p) {
  return absl::StrCat(p.worker_id, " ", p.version, " ", Describe(p.gradients));
}
std::string Describe(const RawStreamRequest& r) {
  const StreamCallHeader& h = r.header;
  return absl::StrCat(h.call_id, " ", static_cast<int>(h.kind), " ", h.worker_id, " ",
                      h.version, " ", h.min_version, " ", h.wait_timeout_ms, " ",
                      static_cast<int32_t>(h.weights_dtype), " ", r.last, " ",
                      Describe(r.gradients));
}
std::string Describe(const RawStreamResponse& r) {
  return absl::StrCat(r.call_id, " ", r.version, " ", r.last, " ", r.status.ToString(), " ",
                      Describe(r.weights));
}

// A PushPullRequest's two halves, as one value for DecodeBothWays.
struct RawPushPull {
  RawPush push;
  RawPull pull;
  std::vector<RawTensorSlice> gradients;  // moved out of push after decoding
};
std::string Describe(const RawPushPull& p) {
  return absl::StrCat(Describe(p.push), " ", Describe(p.pull), " ", Describe(p.gradients));
}

// A PullResponse, as one value for DecodeBothWays.
struct RawPullResponse {
  int64_t version = 0;
  std::vector<RawTensorSlice> weights;
};
std::string Describe(const RawPullResponse& p) {
  return absl::StrCat(p.version, " ", Describe(p.weights));
}

// One TensorSlice, as one value for DecodeBothWays.
struct RawSlices {
  std::vector<RawTensorSlice> slices;
};
std::string Describe(const RawSlices& s) { return Describe(s.slices); }

// True if some complete float (or bf16, widened) of some chunk's data is
// NaN or Inf.
bool AnyNonFinite(const std::vector<RawTensorSlice>& slices) {
  for (const RawTensorSlice& t : slices) {
    std::string bytes = absl::StrJoin(t.data, "");
    if (t.dtype == WireDtype::kBf16) {
      std::vector<float> values(bytes.size() / 2);
      Bf16ToFloats(bytes.data(), values.size(), values.data());
      if (!AllFinite(values.data(), values.size())) return true;
      continue;
    }
    bytes.resize(bytes.size() / sizeof(float) * sizeof(float));
    std::vector<float> values(bytes.size() / sizeof(float));
    if (!bytes.empty()) std::memcpy(values.data(), bytes.data(), bytes.size());
    if (!AllFinite(values.data(), values.size())) return true;
  }
  return false;
}

// Feeds `slices`, in order, to an assembler over `layout` as a shard or a
// client would, and checks the assembler's contract.
void Assemble(const std::vector<RawTensorSlice>& slices,
              const std::shared_ptr<const SliceLayout>& layout) {
  SliceAssembler::Options options;
  options.what = "fuzz";
  options.reject_nonfinite = true;
  SliceAssembler assembler(layout, options);

  const absl::Status validated = assembler.Validate(slices);
  CheckAssemblyStatus(validated);

  const int64_t n = layout->num_elements;
  std::vector<float> buffer(n);
  for (float& f : buffer) std::memcpy(&f, &kSentinelBits, sizeof f);
  const SliceAssembler::Destination dst = [&](const SliceRange& r) -> absl::StatusOr<float*> {
    FUZZ_CHECK(r.flat_offset >= 0 && r.length > 0 && r.length <= n - r.flat_offset);
    return buffer.data() + r.flat_offset;
  };
  absl::Status status;
  for (const RawTensorSlice& chunk : slices) {
    status = assembler.Add(chunk, dst);
    CheckAssemblyStatus(status);
    if (!status.ok()) break;
  }
  if (status.ok()) {
    status = assembler.Finish();
    CheckAssemblyStatus(status);
    if (status.ok()) {
      for (const float& f : buffer) {
        uint32_t bits;
        std::memcpy(&bits, &f, sizeof bits);
        FUZZ_CHECK(bits != kSentinelBits);  // every element written
        FUZZ_CHECK(std::isfinite(f));       // reject_nonfinite
      }
    }
  }
  // Validate is Add without the copy (and so without the NaN/Inf check).
  if (!AnyNonFinite(slices)) FUZZ_CHECK(validated == status);
}

// Decodes the message whole, and cut at the input's cut points, into pieces
// kept by `store`; checks that both decodings agree and leaves the cut one
// in *out (viewing `store`). False if decoding failed.
template <typename T, typename Decode>
bool DecodeBothWays(const FuzzInput& in, Decode decode, PieceStore* store, T* out) {
  T whole;
  const absl::Status whole_status = decode(store->Add(in.message, {}), &whole);
  const absl::Status cut_status = decode(store->Add(in.message, in.cuts), out);
  CheckDecodeStatus(cut_status);
  FUZZ_CHECK(whole_status == cut_status);
  if (!cut_status.ok()) return false;
  FUZZ_CHECK(Describe(whole) == Describe(*out));
  return true;
}

// DecodeBothWays, then the decoded `slices` go through Assemble over the
// input's layout.
template <typename T, typename Decode>
void DecodeAndAssemble(const FuzzInput& in, Decode decode,
                       std::vector<RawTensorSlice> T::*slices) {
  PieceStore store;
  T value;
  if (DecodeBothWays(in, decode, &store, &value)) {
    Assemble(value.*slices, MakeSliceLayout(FuzzSpec(), in.num_shards, in.shard));
  }
}

void FuzzModelSpec(absl::string_view bytes) {
  const ModelSpec spec = DecodeFuzzSpec(bytes);
  SpecLimits small;  // small enough for the fuzzer to reach every limit
  small.max_tensors = 6;
  small.max_name_bytes = 12;
  small.max_rank = 3;
  small.max_tensor_elements = 1000;
  small.max_model_elements = 1500;
  for (const SpecLimits& limits : {SpecLimits(), small}) {
    const absl::Status s = ValidateModelSpec(spec, limits);
    FUZZ_CHECK(s.ok() || s.code() == absl::StatusCode::kInvalidArgument ||
               s.code() == absl::StatusCode::kResourceExhausted);
    if (!s.ok()) continue;
    FUZZ_CHECK(!spec.empty() && spec.size() <= static_cast<size_t>(limits.max_tensors));
    int64_t total = 0;
    for (const TensorSpec& t : spec) {
      FUZZ_CHECK(!t.name.empty() && t.name.size() <= static_cast<size_t>(limits.max_name_bytes));
      FUZZ_CHECK(t.shape.size() <= static_cast<size_t>(limits.max_rank));
      const absl::StatusOr<int64_t> n = CheckedElements(t.shape, limits.max_tensor_elements);
      FUZZ_CHECK(n.ok() && *n == t.num_elements() && *n >= 1);
      total += *n;
    }
    FUZZ_CHECK(total == TotalElements(spec) && total <= limits.max_model_elements);
    // The partition of an accepted spec covers every tensor exactly once.
    for (int shards : {1, 2, 3, 7}) {
      std::vector<int64_t> covered(spec.size(), 0);  // next element of each tensor
      int64_t elements = 0;
      for (int s = 0; s < shards; ++s) {
        const std::shared_ptr<const SliceLayout> layout = MakeSliceLayout(spec, shards, s);
        int64_t flat = 0;
        for (const SliceRange& r : layout->slices) {
          FUZZ_CHECK(r.shard == s && r.length > 0 && r.flat_offset == flat);
          FUZZ_CHECK(r.offset == covered[r.tensor_index]);
          covered[r.tensor_index] += r.length;
          flat += r.length;
          FUZZ_CHECK(layout->by_name.at(spec[r.tensor_index].name) ==
                     &r - layout->slices.data());
        }
        FUZZ_CHECK(layout->num_elements == flat);
        elements += flat;
      }
      for (size_t i = 0; i < spec.size(); ++i) FUZZ_CHECK(covered[i] == spec[i].num_elements());
      FUZZ_CHECK(elements == total);
    }
  }
}

void FuzzOne(const FuzzInput& in) {
  switch (in.target) {
    case FuzzTarget::kPushRequest:
      DecodeAndAssemble(in, DecodePushRequest, &RawPush::gradients);
      break;
    case FuzzTarget::kPushPullRequest:
      DecodeAndAssemble(
          in,
          [](const Pieces& bytes, RawPushPull* out) {
            const absl::Status s = DecodePushPullRequest(bytes, &out->push, &out->pull);
            out->gradients = std::move(out->push.gradients);
            out->push.gradients.clear();
            return s;
          },
          &RawPushPull::gradients);
      break;
    case FuzzTarget::kPullRequest: {
      PieceStore store;
      RawPull pull;
      DecodeBothWays(in, DecodePullRequest, &store, &pull);
      break;
    }
    case FuzzTarget::kPullResponse:
      DecodeAndAssemble(
          in,
          [](const Pieces& bytes, RawPullResponse* out) {
            return DecodePullResponse(bytes, &out->version, &out->weights);
          },
          &RawPullResponse::weights);
      break;
    case FuzzTarget::kStreamRequest:
      DecodeAndAssemble(in, DecodeStreamRequest, &RawStreamRequest::gradients);
      break;
    case FuzzTarget::kStreamResponse:
      DecodeAndAssemble(in, DecodeStreamResponse, &RawStreamResponse::weights);
      break;
    case FuzzTarget::kTensorSlice:
      DecodeAndAssemble(
          in,
          [](const Pieces& bytes, RawSlices* out) {
            out->slices.emplace_back();
            return ReadTensorSlice(bytes, &out->slices.back());
          },
          &RawSlices::slices);
      break;
    case FuzzTarget::kModelSpec:
      FuzzModelSpec(in.message);
      break;
    case FuzzTarget::kPullRowsRequest:
      FuzzPullRows(in);
      break;
    case FuzzTarget::kPushRowsRequest:
      FuzzPushRows(in);
      break;
    case FuzzTarget::kTableSpecs:
      FuzzTableSpecs(in);
      break;
  }
}

}  // namespace
}  // namespace fuzz
}  // namespace ps

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ps::fuzz::FuzzInput in;
  if (ps::fuzz::ParseFuzzInput(
          absl::string_view(reinterpret_cast<const char*>(data), size), &in)) {
    ps::fuzz::FuzzOne(in);
  }
  return 0;
}
