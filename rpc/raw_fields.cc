#include "rpc/raw_fields.h"

#include <string>

#include "absl/strings/str_cat.h"
#include "common/bf16.h"
#include "proto/ps.pb.h"

namespace ps {

using TensorSliceProto = v1::TensorSlice;

size_t TensorSliceSize(const TensorSpec& t, const SliceRange& r, WireDtype dtype) {
  size_t n = 1 + VarintSize(t.name.size()) + t.name.size();
  if (!t.shape.empty()) {
    size_t packed = 0;
    for (int64_t d : t.shape) packed += VarintSize(static_cast<uint64_t>(d));
    n += 1 + VarintSize(packed) + packed;
  }
  n += 1 + VarintSize(static_cast<uint64_t>(r.offset));
  n += 1 + VarintSize(static_cast<uint64_t>(r.length));
  const uint64_t bytes = static_cast<uint64_t>(r.length) * WireDtypeBytes(dtype);
  n += 1 + VarintSize(bytes) + bytes;
  if (dtype != WireDtype::kF32) n += 1 + VarintSize(static_cast<uint64_t>(dtype));
  return n;
}

void WriteTensorSlice(ProtoWriter* w, int field, const TensorSpec& t, const SliceRange& r,
                      const float* values, std::shared_ptr<const void> owner, WireDtype dtype) {
  w->LengthPrefix(field, TensorSliceSize(t, r, dtype));
  w->BytesField(TensorSliceProto::kNameFieldNumber, t.name);
  if (!t.shape.empty()) {
    size_t packed = 0;
    for (int64_t d : t.shape) packed += VarintSize(static_cast<uint64_t>(d));
    w->LengthPrefix(TensorSliceProto::kShapeFieldNumber, packed);
    for (int64_t d : t.shape) w->Varint(static_cast<uint64_t>(d));
  }
  w->VarintField(TensorSliceProto::kOffsetFieldNumber, static_cast<uint64_t>(r.offset));
  w->VarintField(TensorSliceProto::kLengthFieldNumber, static_cast<uint64_t>(r.length));
  if (dtype != WireDtype::kF32) {
    // Before the data, so that a reader knows the type when the bytes come.
    w->VarintField(TensorSliceProto::kDtypeFieldNumber, static_cast<uint64_t>(dtype));
  }
  const uint64_t bytes = static_cast<uint64_t>(r.length) * WireDtypeBytes(dtype);
  w->LengthPrefix(TensorSliceProto::kDataFieldNumber, bytes);
  if (dtype == WireDtype::kBf16 && r.length > 0) {
    const size_t n = static_cast<size_t>(r.length);
    std::shared_ptr<uint16_t> narrow(new uint16_t[n], std::default_delete<uint16_t[]>());
    uint16_t* out = narrow.get();  // before the move below
    FloatsToBf16(values, n, out);
    w->Data(out, bytes, std::move(narrow));
    return;
  }
  w->Data(values, bytes, std::move(owner));
}

absl::Status ReadTensorSlice(const Pieces& bytes, RawTensorSlice* out) {
  using M = TensorSliceProto;
  return ForEachField(bytes, "TensorSlice", [out](FieldReader& f) {
    uint64_t v;
    if (f.Is(M::kNameFieldNumber, kLen)) return f.String("bad name", &out->name);
    if (f.Is(M::kShapeFieldNumber, kLen)) {  // packed
      Pieces packed;
      if (absl::Status s = f.Bytes("bad shape", &packed); !s.ok()) return s;
      ProtoReader pr(std::move(packed));
      while (!pr.done()) {
        if (!pr.ReadVarint(&v) || out->shape.size() == kMaxWireRank) return f.Error("bad shape");
        out->shape.push_back(static_cast<int64_t>(v));
      }
      return absl::OkStatus();
    }
    if (f.Is(M::kShapeFieldNumber, kVarint)) {  // unpacked
      if (!f.reader().ReadVarint(&v) || out->shape.size() == kMaxWireRank) {
        return f.Error("bad shape");
      }
      out->shape.push_back(static_cast<int64_t>(v));
      return absl::OkStatus();
    }
    if (f.Is(M::kOffsetFieldNumber, kVarint)) return f.Int<int64_t>("bad offset", &out->offset);
    if (f.Is(M::kLengthFieldNumber, kVarint)) return f.Int<int64_t>("bad length", &out->length);
    if (f.Is(M::kDataFieldNumber, kLen)) return f.Bytes("truncated data", &out->data);
    if (f.Is(M::kDtypeFieldNumber, kVarint)) {
      if (!f.reader().ReadVarint(&v)) return f.Error("bad dtype");
      out->dtype = WireDtypeFromWire(v);
      return absl::OkStatus();
    }
    return f.Skip();
  });
}

absl::Status ReadSliceField(FieldReader& field, absl::string_view what,
                            std::vector<RawTensorSlice>* out) {
  uint64_t len;
  Pieces p;
  ProtoReader& r = field.reader();
  if (!r.ReadVarint(&len) || !r.ReadPieces(len, &p)) {
    return field.Error(absl::StrCat("truncated ", what));
  }
  if (out->size() == kMaxSlicesPerMessage) return field.Error("too many slices");
  out->emplace_back();
  return ReadTensorSlice(p, &out->back());
}

void WriteIncarnation(ProtoWriter* w, int field, const Incarnation& inc) {
  if (inc.run_id == 0 && inc.start == 0) return;
  v1::Incarnation m;
  m.set_run_id(inc.run_id);
  m.set_start(inc.start);
  w->BytesField(field, m.SerializeAsString());
}

absl::Status ReadIncarnation(FieldReader& field, Incarnation* out) {
  uint64_t len;
  std::string bytes;
  ProtoReader& r = field.reader();
  v1::Incarnation m;
  if (!r.ReadVarint(&len) || len > 64 || !r.ReadString(len, &bytes) ||
      !m.ParseFromString(bytes)) {
    return field.Error("bad incarnation");
  }
  *out = Incarnation{m.run_id(), m.start()};
  return absl::OkStatus();
}

void WriteOutcome(ProtoWriter* w, int field, PushOutcome outcome) {
  if (outcome != PushOutcome::kApplied) w->VarintField(field, static_cast<uint64_t>(outcome));
}

absl::Status ReadOutcome(FieldReader& field, absl::string_view what, PushOutcome* out) {
  uint64_t v;
  if (!field.reader().ReadVarint(&v) || v > 2) return field.Error(what);
  *out = static_cast<PushOutcome>(v);
  return absl::OkStatus();
}

void WriteWeightsDtype(ProtoWriter* w, int field, WireDtype dtype) {
  if (dtype != WireDtype::kF32) w->VarintField(field, static_cast<uint64_t>(dtype));
}

absl::Status ReadWeightsDtype(FieldReader& field, WireDtype* out) {
  uint64_t v;
  if (!field.reader().ReadVarint(&v)) return field.Error("bad weights_dtype");
  const WireDtype d = WireDtypeFromWire(v);
  if (!IsKnownWireDtype(d)) {
    return field.Error(absl::StrCat("unknown weights_dtype ", v, " (expected 0 = f32 or 1 = bf16)"));
  }
  *out = d;
  return absl::OkStatus();
}

}  // namespace ps
