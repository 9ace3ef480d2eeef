#include "tests/fuzz/fuzz_input.h"

#include <algorithm>

namespace ps {
namespace fuzz {
namespace {

constexpr size_t kHeaderBytes = 3;
constexpr int kMaxCuts = 7;

void PutVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

// Reads a varint at *pos; false at the end of `bytes` or after 10 bytes.
bool GetVarint(absl::string_view bytes, size_t* pos, uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64 && *pos < bytes.size(); shift += 7) {
    const uint8_t b = static_cast<uint8_t>(bytes[(*pos)++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

}  // namespace

const char* TargetName(FuzzTarget target) {
  switch (target) {
    case FuzzTarget::kPushRequest: return "push_request";
    case FuzzTarget::kPushPullRequest: return "push_pull_request";
    case FuzzTarget::kPullRequest: return "pull_request";
    case FuzzTarget::kPullResponse: return "pull_response";
    case FuzzTarget::kStreamRequest: return "stream_request";
    case FuzzTarget::kStreamResponse: return "stream_response";
    case FuzzTarget::kTensorSlice: return "tensor_slice";
    case FuzzTarget::kModelSpec: return "model_spec";
    case FuzzTarget::kPullRowsRequest: return "pull_rows_request";
    case FuzzTarget::kPushRowsRequest: return "push_rows_request";
    case FuzzTarget::kTableSpecs: return "table_specs";
  }
  return "unknown";
}

const ModelSpec& FuzzSpec() {
  static const ModelSpec* spec = new ModelSpec{
      {"fc1.weight", {4, 3}}, {"fc1.bias", {3}}, {"fc2.weight", {3, 2}}, {"fc2.bias", {2}}};
  return *spec;
}

bool ParseFuzzInput(absl::string_view data, FuzzInput* out) {
  if (data.size() < kHeaderBytes) return false;
  const uint8_t* h = reinterpret_cast<const uint8_t*>(data.data());
  out->target = static_cast<FuzzTarget>(h[0] % kNumTargets);
  out->num_shards = 1 + h[1] % 3;
  out->shard = (h[1] / 3) % out->num_shards;
  const size_t num_cuts = h[2] % (kMaxCuts + 1);
  if (data.size() < kHeaderBytes + 2 * num_cuts) return false;
  out->message = data.substr(kHeaderBytes + 2 * num_cuts);
  out->cuts.clear();
  for (size_t i = 0; i < num_cuts; ++i) {
    const size_t at = h[kHeaderBytes + 2 * i] | (size_t{h[kHeaderBytes + 2 * i + 1]} << 8);
    out->cuts.push_back(at % (out->message.size() + 1));
  }
  std::sort(out->cuts.begin(), out->cuts.end());
  return true;
}

std::string MakeFuzzInput(FuzzTarget target, int num_shards, int shard,
                          const std::vector<size_t>& cuts, absl::string_view message) {
  std::string out;
  out.push_back(static_cast<char>(target));
  out.push_back(static_cast<char>(shard * 3 + (num_shards - 1)));
  out.push_back(static_cast<char>(cuts.size()));
  for (size_t at : cuts) {
    out.push_back(static_cast<char>(at & 0xff));
    out.push_back(static_cast<char>((at >> 8) & 0xff));
  }
  out.append(message.data(), message.size());
  return out;
}

std::string EncodeFuzzSpec(const ModelSpec& spec) {
  std::string out;
  for (const TensorSpec& t : spec) {
    PutVarint(t.name.size(), &out);
    out += t.name;
    PutVarint(t.shape.size(), &out);
    for (int64_t d : t.shape) PutVarint(static_cast<uint64_t>(d), &out);
  }
  return out;
}

ModelSpec DecodeFuzzSpec(absl::string_view bytes) {
  ModelSpec spec;
  size_t pos = 0;
  while (pos < bytes.size()) {
    TensorSpec t;
    uint64_t name_size, rank, d;
    if (!GetVarint(bytes, &pos, &name_size) || name_size > bytes.size() - pos) break;
    t.name = std::string(bytes.substr(pos, name_size));
    pos += name_size;
    if (!GetVarint(bytes, &pos, &rank) || rank > bytes.size() - pos) break;
    for (uint64_t i = 0; i < rank && GetVarint(bytes, &pos, &d); ++i) {
      t.shape.push_back(static_cast<int64_t>(d));
    }
    if (t.shape.size() != rank) break;
    spec.push_back(std::move(t));
  }
  return spec;
}

}  // namespace fuzz
}  // namespace ps
