#include "rpc/raw_wire.h"

#include <cstring>

#include "absl/strings/str_cat.h"
#include "proto/ps.pb.h"

namespace ps {
namespace {

constexpr int kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;

// Field numbers come from the generated code, so ps.proto stays their one
// source; raw_wire_test checks the bytes against the generated parsers.
using TensorSliceProto = v1::TensorSlice;
using PushRequestProto = v1::PushRequest;
using PushPullRequestProto = v1::PushPullRequest;
using PullRequestProto = v1::PullRequest;
using PullResponseProto = v1::PullResponse;
using StreamRequestProto = v1::StreamRequest;
using StreamResponseProto = v1::StreamResponse;

// Releases the shared owner of a data slice when gRPC drops the slice.
void ReleaseOwner(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

}  // namespace

size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

void ProtoWriter::Varint(uint64_t v) {
  while (v >= 0x80) {
    header_.push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  header_.push_back(static_cast<char>(v));
}

void ProtoWriter::Tag(int field, int wire_type) {
  Varint((static_cast<uint64_t>(field) << 3) | wire_type);
}

void ProtoWriter::VarintField(int field, uint64_t v) {
  Tag(field, kVarint);
  Varint(v);
}

void ProtoWriter::LengthPrefix(int field, uint64_t len) {
  Tag(field, kLen);
  Varint(len);
}

void ProtoWriter::BytesField(int field, absl::string_view bytes) {
  LengthPrefix(field, bytes.size());
  header_.append(bytes.data(), bytes.size());
}

void ProtoWriter::FlushHeader() {
  if (header_.empty()) return;
  slices_.emplace_back(header_);
  header_.clear();
}

void ProtoWriter::Data(const void* data, size_t len, std::shared_ptr<const void> owner) {
  if (len == 0) return;
  FlushHeader();
  void* buf = const_cast<void*>(data);
  if (owner == nullptr) {
    slices_.emplace_back(buf, len, grpc::Slice::STATIC_SLICE);
  } else {
    slices_.emplace_back(buf, len, &ReleaseOwner, new std::shared_ptr<const void>(std::move(owner)));
  }
}

grpc::ByteBuffer ProtoWriter::Finish() {
  FlushHeader();
  return grpc::ByteBuffer(slices_.data(), slices_.size());
}

size_t TensorSliceSize(const TensorSpec& t, const SliceRange& r) {
  size_t n = 1 + VarintSize(t.name.size()) + t.name.size();
  if (!t.shape.empty()) {
    size_t packed = 0;
    for (int64_t d : t.shape) packed += VarintSize(static_cast<uint64_t>(d));
    n += 1 + VarintSize(packed) + packed;
  }
  n += 1 + VarintSize(static_cast<uint64_t>(r.offset));
  n += 1 + VarintSize(static_cast<uint64_t>(r.length));
  const uint64_t bytes = static_cast<uint64_t>(r.length) * sizeof(float);
  n += 1 + VarintSize(bytes) + bytes;
  return n;
}

void WriteTensorSlice(ProtoWriter* w, int field, const TensorSpec& t, const SliceRange& r,
                      const float* values, std::shared_ptr<const void> owner) {
  w->LengthPrefix(field, TensorSliceSize(t, r));
  w->BytesField(TensorSliceProto::kNameFieldNumber, t.name);
  if (!t.shape.empty()) {
    size_t packed = 0;
    for (int64_t d : t.shape) packed += VarintSize(static_cast<uint64_t>(d));
    w->LengthPrefix(TensorSliceProto::kShapeFieldNumber, packed);
    for (int64_t d : t.shape) w->Varint(static_cast<uint64_t>(d));
  }
  w->VarintField(TensorSliceProto::kOffsetFieldNumber, static_cast<uint64_t>(r.offset));
  w->VarintField(TensorSliceProto::kLengthFieldNumber, static_cast<uint64_t>(r.length));
  const uint64_t bytes = static_cast<uint64_t>(r.length) * sizeof(float);
  w->LengthPrefix(TensorSliceProto::kDataFieldNumber, bytes);
  w->Data(values, bytes, std::move(owner));
}

bool ProtoReader::ReadVarint(uint64_t* v) {
  *v = 0;
  for (int shift = 0; shift < 64; shift += 7) {
    Normalize();
    if (piece_ == pieces_.size()) return false;
    const uint8_t b = static_cast<uint8_t>(pieces_[piece_][pos_++]);
    *v |= static_cast<uint64_t>(b & 0x7f) << shift;
    if ((b & 0x80) == 0) return true;
  }
  return false;
}

bool ProtoReader::ReadTag(int* field, int* wire_type) {
  uint64_t tag;
  if (!ReadVarint(&tag)) return false;
  *field = static_cast<int>(tag >> 3);
  *wire_type = static_cast<int>(tag & 7);
  return *field > 0;
}

bool ProtoReader::ReadPieces(uint64_t len, Pieces* out) {
  out->clear();
  while (len > 0) {
    Normalize();
    if (piece_ == pieces_.size()) return false;
    const size_t take =
        static_cast<size_t>(std::min<uint64_t>(pieces_[piece_].size() - pos_, len));
    out->push_back(pieces_[piece_].substr(pos_, take));
    pos_ += take;
    len -= take;
  }
  return true;
}

bool ProtoReader::ReadString(uint64_t len, std::string* out) {
  Pieces p;
  if (len > (uint64_t{1} << 20) || !ReadPieces(len, &p)) return false;  // names are short
  out->clear();
  for (absl::string_view s : p) out->append(s.data(), s.size());
  return true;
}

bool ProtoReader::SkipField(int wire_type) {
  uint64_t v;
  Pieces p;
  switch (wire_type) {
    case kVarint: return ReadVarint(&v);
    case kFixed64: return ReadPieces(8, &p);
    case kLen: return ReadVarint(&v) && ReadPieces(v, &p);
    case kFixed32: return ReadPieces(4, &p);
    default: return false;
  }
}

absl::Status Receive(const grpc::ByteBuffer& buffer, ReceivedBytes* out) {
  out->slices.clear();
  out->pieces.clear();
  if (!buffer.Dump(&out->slices).ok()) return absl::InternalError("cannot read message bytes");
  for (const grpc::Slice& s : out->slices) {
    out->pieces.emplace_back(reinterpret_cast<const char*>(s.begin()), s.size());
  }
  return absl::OkStatus();
}

absl::Status ReadTensorSlice(const Pieces& bytes, RawTensorSlice* out) {
  ProtoReader r(bytes);
  auto bad = [](absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat("malformed TensorSlice: ", what));
  };
  while (!r.done()) {
    int field, wt;
    if (!r.ReadTag(&field, &wt)) return bad("bad tag");
    uint64_t v;
    if (field == TensorSliceProto::kNameFieldNumber && wt == kLen) {
      if (!r.ReadVarint(&v) || !r.ReadString(v, &out->name)) return bad("bad name");
    } else if (field == TensorSliceProto::kShapeFieldNumber && wt == kLen) {  // packed
      Pieces packed;
      if (!r.ReadVarint(&v) || !r.ReadPieces(v, &packed)) return bad("bad shape");
      ProtoReader pr(std::move(packed));
      while (!pr.done()) {
        if (!pr.ReadVarint(&v) || out->shape.size() == kMaxWireRank) return bad("bad shape");
        out->shape.push_back(static_cast<int64_t>(v));
      }
    } else if (field == TensorSliceProto::kShapeFieldNumber && wt == kVarint) {  // unpacked
      if (!r.ReadVarint(&v) || out->shape.size() == kMaxWireRank) return bad("bad shape");
      out->shape.push_back(static_cast<int64_t>(v));
    } else if (field == TensorSliceProto::kOffsetFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return bad("bad offset");
      out->offset = static_cast<int64_t>(v);
    } else if (field == TensorSliceProto::kLengthFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return bad("bad length");
      out->length = static_cast<int64_t>(v);
    } else if (field == TensorSliceProto::kDataFieldNumber && wt == kLen) {
      if (!r.ReadVarint(&v) || !r.ReadPieces(v, &out->data)) return bad("truncated data");
    } else if (!r.SkipField(wt)) {
      return bad(absl::StrCat("bad field ", field));
    }
  }
  return absl::OkStatus();
}

namespace {

size_t PushRequestSize(int worker_id, int64_t version, const ModelSpec& spec,
                       const std::vector<SliceRange>& slices, int64_t seq) {
  size_t n = 1 + VarintSize(static_cast<uint64_t>(int64_t{worker_id})) + 1 +
             VarintSize(static_cast<uint64_t>(version));
  if (seq != 0) n += 1 + VarintSize(static_cast<uint64_t>(seq));
  for (const SliceRange& r : slices) {
    const size_t ts = TensorSliceSize(spec[r.tensor_index], r);
    n += 1 + VarintSize(ts) + ts;
  }
  return n;
}

void WritePushRequest(ProtoWriter* w, int worker_id, int64_t version, const ModelSpec& spec,
                      const std::vector<SliceRange>& slices, const SliceValues& values,
                      int64_t seq) {
  w->VarintField(PushRequestProto::kWorkerIdFieldNumber,
                 static_cast<uint64_t>(int64_t{worker_id}));
  w->VarintField(PushRequestProto::kVersionFieldNumber, static_cast<uint64_t>(version));
  if (seq != 0) w->VarintField(PushRequestProto::kSeqFieldNumber, static_cast<uint64_t>(seq));
  for (const SliceRange& r : slices) {
    WriteTensorSlice(w, PushRequestProto::kGradientsFieldNumber, spec[r.tensor_index], r,
                     values(r), nullptr);
  }
}

absl::Status Malformed(absl::string_view message, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", message, ": ", what));
}

// Incarnation{run_id, start} as field `field` (nothing when unknown).
void WriteIncarnation(ProtoWriter* w, int field, const Incarnation& inc) {
  if (inc.run_id == 0 && inc.start == 0) return;
  v1::Incarnation m;
  m.set_run_id(inc.run_id);
  m.set_start(inc.start);
  w->BytesField(field, m.SerializeAsString());
}

// Reads an Incarnation message whose tag was just read.
bool ReadIncarnation(ProtoReader* r, Incarnation* out) {
  uint64_t len;
  std::string bytes;
  if (!r->ReadVarint(&len) || len > 64 || !r->ReadString(len, &bytes)) return false;
  v1::Incarnation m;
  if (!m.ParseFromString(bytes)) return false;
  *out = Incarnation{m.run_id(), m.start()};
  return true;
}

bool ReadOutcome(ProtoReader* r, PushOutcome* out) {
  uint64_t v;
  if (!r->ReadVarint(&v) || v > 2) return false;
  *out = static_cast<PushOutcome>(v);
  return true;
}

void WriteOutcome(ProtoWriter* w, int field, PushOutcome outcome) {
  if (outcome != PushOutcome::kApplied) w->VarintField(field, static_cast<uint64_t>(outcome));
}

}  // namespace

grpc::ByteBuffer EncodePushRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                   const std::vector<SliceRange>& slices,
                                   const SliceValues& values, int64_t seq) {
  ProtoWriter w;
  WritePushRequest(&w, worker_id, version, spec, slices, values, seq);
  return w.Finish();
}

grpc::ByteBuffer EncodePushPullRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                       const std::vector<SliceRange>& slices,
                                       const SliceValues& values, int64_t min_version,
                                       int64_t wait_timeout_ms, int64_t seq) {
  ProtoWriter w;
  w.LengthPrefix(PushPullRequestProto::kPushFieldNumber,
                 PushRequestSize(worker_id, version, spec, slices, seq));
  WritePushRequest(&w, worker_id, version, spec, slices, values, seq);
  w.VarintField(PushPullRequestProto::kMinVersionFieldNumber, static_cast<uint64_t>(min_version));
  w.VarintField(PushPullRequestProto::kWaitTimeoutMsFieldNumber,
                static_cast<uint64_t>(wait_timeout_ms));
  return w.Finish();
}

grpc::ByteBuffer EncodePushResponse(int64_t version, PushOutcome outcome,
                                    const Incarnation& incarnation) {
  ProtoWriter w;
  w.VarintField(v1::PushResponse::kVersionFieldNumber, static_cast<uint64_t>(version));
  WriteOutcome(&w, v1::PushResponse::kOutcomeFieldNumber, outcome);
  WriteIncarnation(&w, v1::PushResponse::kIncarnationFieldNumber, incarnation);
  return w.Finish();
}

grpc::ByteBuffer EncodePullResponse(int64_t version, const ModelSpec& spec,
                                    const std::vector<SliceRange>& slices,
                                    const SliceValues& values, std::shared_ptr<const void> owner,
                                    const ReplyInfo& info) {
  ProtoWriter w;
  w.VarintField(PullResponseProto::kVersionFieldNumber, static_cast<uint64_t>(version));
  WriteIncarnation(&w, PullResponseProto::kIncarnationFieldNumber, info.incarnation);
  WriteOutcome(&w, PullResponseProto::kPushOutcomeFieldNumber, info.outcome);
  for (const SliceRange& r : slices) {
    WriteTensorSlice(&w, PullResponseProto::kWeightsFieldNumber, spec[r.tensor_index], r,
                     values(r), owner);
  }
  return w.Finish();
}

std::vector<std::vector<SliceRange>> ChunkSlices(const std::vector<SliceRange>& slices,
                                                 size_t chunk_bytes) {
  const int64_t chunk = std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / sizeof(float)));
  std::vector<std::vector<SliceRange>> messages(1);
  int64_t room = chunk;
  for (const SliceRange& r : slices) {
    for (int64_t done = 0; done < r.length;) {
      if (room == 0) {
        messages.emplace_back();
        room = chunk;
      }
      SliceRange piece = r;
      piece.offset = r.offset + done;
      piece.flat_offset = r.flat_offset + done;
      piece.length = std::min(room, r.length - done);
      messages.back().push_back(piece);
      done += piece.length;
      room -= piece.length;
    }
  }
  return messages;
}

std::vector<grpc::ByteBuffer> EncodeStreamRequests(const StreamCallHeader& h, bool first,
                                                   bool last, const ModelSpec& spec,
                                                   const std::vector<SliceRange>& slices,
                                                   const SliceValues& values,
                                                   size_t chunk_bytes) {
  std::vector<std::vector<SliceRange>> messages = ChunkSlices(slices, chunk_bytes);
  std::vector<grpc::ByteBuffer> out;
  for (size_t m = 0; m < messages.size(); ++m) {
    ProtoWriter w;
    using M = StreamRequestProto;
    w.VarintField(M::kCallIdFieldNumber, h.call_id);
    if (first && m == 0) {
      w.VarintField(M::kKindFieldNumber, static_cast<uint64_t>(h.kind));
      w.VarintField(M::kWorkerIdFieldNumber, static_cast<uint64_t>(int64_t{h.worker_id}));
      w.VarintField(M::kVersionFieldNumber, static_cast<uint64_t>(h.version));
      w.VarintField(M::kMinVersionFieldNumber, static_cast<uint64_t>(h.min_version));
      w.VarintField(M::kWaitTimeoutMsFieldNumber, static_cast<uint64_t>(h.wait_timeout_ms));
      if (h.seq != 0) w.VarintField(M::kSeqFieldNumber, static_cast<uint64_t>(h.seq));
    }
    for (const SliceRange& r : messages[m]) {
      WriteTensorSlice(&w, M::kGradientsFieldNumber, spec[r.tensor_index], r, values(r),
                       nullptr);
    }
    if (last && m + 1 == messages.size()) w.VarintField(M::kLastFieldNumber, 1);
    out.push_back(w.Finish());
  }
  return out;
}

std::vector<grpc::ByteBuffer> EncodeStreamWeights(uint64_t call_id, int64_t version,
                                                  const ModelSpec& spec,
                                                  const std::vector<SliceRange>& slices,
                                                  const SliceValues& values,
                                                  std::shared_ptr<const void> owner,
                                                  size_t chunk_bytes, const ReplyInfo& info) {
  std::vector<std::vector<SliceRange>> messages = ChunkSlices(slices, chunk_bytes);
  std::vector<grpc::ByteBuffer> out;
  for (size_t m = 0; m < messages.size(); ++m) {
    ProtoWriter w;
    using M = StreamResponseProto;
    w.VarintField(M::kCallIdFieldNumber, call_id);
    w.VarintField(M::kVersionFieldNumber, static_cast<uint64_t>(version));
    if (m == 0) {
      WriteIncarnation(&w, M::kIncarnationFieldNumber, info.incarnation);
      WriteOutcome(&w, M::kPushOutcomeFieldNumber, info.outcome);
    }
    for (const SliceRange& r : messages[m]) {
      WriteTensorSlice(&w, M::kWeightsFieldNumber, spec[r.tensor_index], r, values(r), owner);
    }
    if (m + 1 == messages.size()) w.VarintField(M::kLastFieldNumber, 1);
    out.push_back(w.Finish());
  }
  return out;
}

grpc::ByteBuffer EncodeStreamDone(uint64_t call_id, int64_t version, const absl::Status& status,
                                  const ReplyInfo& info) {
  using M = StreamResponseProto;
  ProtoWriter w;
  w.VarintField(M::kCallIdFieldNumber, call_id);
  w.VarintField(M::kVersionFieldNumber, static_cast<uint64_t>(version));
  WriteIncarnation(&w, M::kIncarnationFieldNumber, info.incarnation);
  WriteOutcome(&w, M::kPushOutcomeFieldNumber, info.outcome);
  w.VarintField(M::kLastFieldNumber, 1);
  if (!status.ok()) {
    w.VarintField(M::kErrorCodeFieldNumber,
                  static_cast<uint64_t>(static_cast<int64_t>(status.code())));
    w.BytesField(M::kErrorMessageFieldNumber, status.message());
  }
  return w.Finish();
}

namespace {

// Reads one length-delimited TensorSlice field of `message` into `out`, at
// most kMaxSlicesPerMessage of them per message.
absl::Status ReadSliceField(ProtoReader* r, absl::string_view message, absl::string_view what,
                            std::vector<RawTensorSlice>* out) {
  uint64_t len;
  Pieces p;
  if (!r->ReadVarint(&len) || !r->ReadPieces(len, &p)) {
    return Malformed(message, absl::StrCat("truncated ", what));
  }
  if (out->size() == kMaxSlicesPerMessage) return Malformed(message, "too many slices");
  out->emplace_back();
  return ReadTensorSlice(p, &out->back());
}

}  // namespace

absl::Status DecodeStreamRequest(const Pieces& bytes, RawStreamRequest* out) {
  using M = StreamRequestProto;
  ProtoReader r(bytes);
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("StreamRequest", "bad tag");
    if (field == M::kGradientsFieldNumber && wt == kLen) {
      if (absl::Status s = ReadSliceField(&r, "StreamRequest", "gradient", &out->gradients);
          !s.ok()) {
        return s;
      }
    } else if (field >= M::kCallIdFieldNumber && field <= M::kLastFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("StreamRequest", "bad varint");
      StreamCallHeader& h = out->header;
      switch (field) {
        case M::kCallIdFieldNumber: h.call_id = v; break;
        case M::kKindFieldNumber:
          if (v > 2) return Malformed("StreamRequest", absl::StrCat("unknown call kind ", v));
          h.kind = static_cast<StreamCall>(v);
          break;
        case M::kWorkerIdFieldNumber: h.worker_id = static_cast<int32_t>(v); break;
        case M::kVersionFieldNumber: h.version = static_cast<int64_t>(v); break;
        case M::kMinVersionFieldNumber: h.min_version = static_cast<int64_t>(v); break;
        case M::kWaitTimeoutMsFieldNumber: h.wait_timeout_ms = static_cast<int64_t>(v); break;
        case M::kLastFieldNumber: out->last = v != 0; break;
        default: break;  // gradients sent as a varint: read and ignored
      }
    } else if (field == M::kSeqFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("StreamRequest", "bad seq");
      out->header.seq = static_cast<int64_t>(v);
    } else if (!r.SkipField(wt)) {
      return Malformed("StreamRequest", absl::StrCat("bad field ", field));
    }
  }
  return absl::OkStatus();
}

absl::Status DecodeStreamResponse(const Pieces& bytes, RawStreamResponse* out) {
  using M = StreamResponseProto;
  ProtoReader r(bytes);
  int64_t code = 0;
  std::string message;
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("StreamResponse", "bad tag");
    if (field == M::kWeightsFieldNumber && wt == kLen) {
      if (absl::Status s = ReadSliceField(&r, "StreamResponse", "weights", &out->weights);
          !s.ok()) {
        return s;
      }
    } else if (field == M::kErrorMessageFieldNumber && wt == kLen) {
      if (!r.ReadVarint(&v) || !r.ReadString(v, &message)) {
        return Malformed("StreamResponse", "bad error message");
      }
    } else if (field == M::kIncarnationFieldNumber && wt == kLen) {
      if (!ReadIncarnation(&r, &out->info.incarnation)) {
        return Malformed("StreamResponse", "bad incarnation");
      }
    } else if (field == M::kPushOutcomeFieldNumber && wt == kVarint) {
      if (!ReadOutcome(&r, &out->info.outcome)) {
        return Malformed("StreamResponse", "bad push_outcome");
      }
    } else if (field >= M::kCallIdFieldNumber && field <= M::kErrorCodeFieldNumber &&
               wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("StreamResponse", "bad varint");
      if (field == M::kCallIdFieldNumber) out->call_id = v;
      if (field == M::kVersionFieldNumber) out->version = static_cast<int64_t>(v);
      if (field == M::kLastFieldNumber) out->last = v != 0;
      if (field == M::kErrorCodeFieldNumber) code = static_cast<int64_t>(v);
    } else if (!r.SkipField(wt)) {
      return Malformed("StreamResponse", absl::StrCat("bad field ", field));
    }
  }
  if (code != 0) {
    out->status = absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  return absl::OkStatus();
}

absl::Status DecodePushRequest(const Pieces& bytes, RawPush* out) {
  using M = PushRequestProto;
  ProtoReader r(bytes);
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("PushRequest", "bad tag");
    if (field == M::kWorkerIdFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PushRequest", "bad worker_id");
      out->worker_id = static_cast<int32_t>(v);
    } else if (field == M::kVersionFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PushRequest", "bad version");
      out->version = static_cast<int64_t>(v);
    } else if (field == M::kSeqFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PushRequest", "bad seq");
      out->seq = static_cast<int64_t>(v);
    } else if (field == M::kGradientsFieldNumber && wt == kLen) {
      if (absl::Status s = ReadSliceField(&r, "PushRequest", "gradient", &out->gradients);
          !s.ok()) {
        return s;
      }
    } else if (!r.SkipField(wt)) {
      return Malformed("PushRequest", absl::StrCat("bad field ", field));
    }
  }
  return absl::OkStatus();
}

absl::Status DecodePushPullRequest(const Pieces& bytes, RawPush* push, RawPull* pull) {
  using M = PushPullRequestProto;
  ProtoReader r(bytes);
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("PushPullRequest", "bad tag");
    if (field == M::kPushFieldNumber && wt == kLen) {
      Pieces p;
      if (!r.ReadVarint(&v) || !r.ReadPieces(v, &p)) {
        return Malformed("PushPullRequest", "truncated push");
      }
      if (absl::Status s = DecodePushRequest(p, push); !s.ok()) return s;
    } else if (field == M::kMinVersionFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PushPullRequest", "bad varint");
      pull->min_version = static_cast<int64_t>(v);
    } else if (field == M::kWaitTimeoutMsFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PushPullRequest", "bad varint");
      pull->wait_timeout_ms = static_cast<int64_t>(v);
    } else if (!r.SkipField(wt)) {
      return Malformed("PushPullRequest", absl::StrCat("bad field ", field));
    }
  }
  pull->worker_id = push->worker_id;
  return absl::OkStatus();
}

absl::Status DecodePullRequest(const Pieces& bytes, RawPull* out) {
  using M = PullRequestProto;
  ProtoReader r(bytes);
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("PullRequest", "bad tag");
    if (field >= M::kWorkerIdFieldNumber && field <= M::kWaitTimeoutMsFieldNumber &&
        wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PullRequest", "bad varint");
      if (field == M::kWorkerIdFieldNumber) out->worker_id = static_cast<int32_t>(v);
      if (field == M::kMinVersionFieldNumber) out->min_version = static_cast<int64_t>(v);
      if (field == M::kWaitTimeoutMsFieldNumber) out->wait_timeout_ms = static_cast<int64_t>(v);
    } else if (!r.SkipField(wt)) {
      return Malformed("PullRequest", absl::StrCat("bad field ", field));
    }
  }
  return absl::OkStatus();
}

absl::Status DecodePullResponse(const Pieces& bytes, int64_t* version,
                                std::vector<RawTensorSlice>* weights, ReplyInfo* info) {
  using M = PullResponseProto;
  ReplyInfo ignored;
  if (info == nullptr) info = &ignored;
  ProtoReader r(bytes);
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("PullResponse", "bad tag");
    if (field == M::kVersionFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PullResponse", "bad version");
      *version = static_cast<int64_t>(v);
    } else if (field == M::kWeightsFieldNumber && wt == kLen) {
      if (absl::Status s = ReadSliceField(&r, "PullResponse", "weights", weights); !s.ok()) {
        return s;
      }
    } else if (field == M::kIncarnationFieldNumber && wt == kLen) {
      if (!ReadIncarnation(&r, &info->incarnation)) {
        return Malformed("PullResponse", "bad incarnation");
      }
    } else if (field == M::kPushOutcomeFieldNumber && wt == kVarint) {
      if (!ReadOutcome(&r, &info->outcome)) return Malformed("PullResponse", "bad push_outcome");
    } else if (!r.SkipField(wt)) {
      return Malformed("PullResponse", absl::StrCat("bad field ", field));
    }
  }
  return absl::OkStatus();
}

absl::Status DecodePushResponse(const Pieces& bytes, int64_t* version, ReplyInfo* info) {
  using M = v1::PushResponse;
  ProtoReader r(bytes);
  while (!r.done()) {
    int field, wt;
    uint64_t v;
    if (!r.ReadTag(&field, &wt)) return Malformed("PushResponse", "bad tag");
    if (field == M::kVersionFieldNumber && wt == kVarint) {
      if (!r.ReadVarint(&v)) return Malformed("PushResponse", "bad version");
      *version = static_cast<int64_t>(v);
    } else if (field == M::kIncarnationFieldNumber && wt == kLen) {
      if (!ReadIncarnation(&r, &info->incarnation)) {
        return Malformed("PushResponse", "bad incarnation");
      }
    } else if (field == M::kOutcomeFieldNumber && wt == kVarint) {
      if (!ReadOutcome(&r, &info->outcome)) return Malformed("PushResponse", "bad outcome");
    } else if (!r.SkipField(wt)) {
      return Malformed("PushResponse", absl::StrCat("bad field ", field));
    }
  }
  return absl::OkStatus();
}

}  // namespace ps
