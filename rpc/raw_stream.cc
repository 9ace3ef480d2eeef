#include "rpc/raw_stream.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/float_bytes.h"
#include "proto/ps.pb.h"

namespace ps {
namespace {

using StreamRequestProto = v1::StreamRequest;
using StreamResponseProto = v1::StreamResponse;

}  // namespace

std::vector<std::vector<SliceRange>> ChunkSlices(const std::vector<SliceRange>& slices,
                                                 size_t chunk_bytes, WireDtype dtype) {
  const int64_t chunk =
      std::max<int64_t>(1, static_cast<int64_t>(chunk_bytes / WireDtypeBytes(dtype)));
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

std::vector<grpc::ByteBuffer> EncodeStreamRequests(const StreamCallHeader& h, bool first, bool last,
                                                   const ModelSpec& spec,
                                                   const std::vector<SliceRange>& slices,
                                                   const SliceValues& values, size_t chunk_bytes,
                                                   WireDtype dtype) {
  std::vector<std::vector<SliceRange>> messages = ChunkSlices(slices, chunk_bytes, dtype);
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
      WriteWeightsDtype(&w, M::kWeightsDtypeFieldNumber, h.weights_dtype);
    }
    for (const SliceRange& r : messages[m]) {
      WriteTensorSlice(&w, M::kGradientsFieldNumber, spec[r.tensor_index], r, values(r), nullptr,
                       dtype);
    }
    if (last && m + 1 == messages.size()) w.VarintField(M::kLastFieldNumber, 1);
    out.push_back(w.Finish());
  }
  return out;
}

std::vector<grpc::ByteBuffer> EncodeStreamWeights(
    uint64_t call_id, int64_t version, const ModelSpec& spec, const std::vector<SliceRange>& slices,
    const SliceValues& values, std::shared_ptr<const void> owner, size_t chunk_bytes,
    const ReplyInfo& info, WireDtype dtype) {
  std::vector<std::vector<SliceRange>> messages = ChunkSlices(slices, chunk_bytes, dtype);
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
      WriteTensorSlice(&w, M::kWeightsFieldNumber, spec[r.tensor_index], r, values(r), owner,
                       dtype);
    }
    if (m + 1 == messages.size()) w.VarintField(M::kLastFieldNumber, 1);
    out.push_back(w.Finish());
  }
  return out;
}

grpc::ByteBuffer EncodeStreamRowsRequest(const StreamCallHeader& h, absl::Span<const uint64_t> ids,
                                         absl::Span<const float> grads) {
  using M = StreamRequestProto;
  ProtoWriter w;
  w.VarintField(M::kCallIdFieldNumber, h.call_id);
  w.VarintField(M::kKindFieldNumber, static_cast<uint64_t>(h.kind));
  w.VarintField(M::kWorkerIdFieldNumber, static_cast<uint64_t>(int64_t{h.worker_id}));
  w.VarintField(M::kVersionFieldNumber, static_cast<uint64_t>(h.version));
  if (h.seq != 0) w.VarintField(M::kSeqFieldNumber, static_cast<uint64_t>(h.seq));
  w.BytesField(M::kTableFieldNumber, h.table);
  if (h.prefetch) w.VarintField(M::kPrefetchFieldNumber, 1);
  if (h.min_version != 0) {
    w.VarintField(M::kMinVersionFieldNumber, static_cast<uint64_t>(h.min_version));
  }
  if (h.wait_timeout_ms != 0) {
    w.VarintField(M::kWaitTimeoutMsFieldNumber, static_cast<uint64_t>(h.wait_timeout_ms));
  }
  // Packed fixed64 and float32 are the host's little-endian bytes
  // (common/float_bytes.h assumes the same).
  w.BytesField(M::kIdsFieldNumber, absl::string_view(reinterpret_cast<const char*>(ids.data()),
                                                     ids.size() * sizeof(uint64_t)));
  if (IsRowPush(h.kind)) {
    w.BytesField(M::kRowGradsFieldNumber,
                 absl::string_view(reinterpret_cast<const char*>(grads.data()),
                                   grads.size() * sizeof(float)));
  }
  w.VarintField(M::kLastFieldNumber, 1);
  return w.Finish();
}

std::vector<grpc::ByteBuffer> EncodeStreamRows(uint64_t call_id, int64_t version,
                                               std::shared_ptr<const std::vector<float>> rows,
                                               const ReplyInfo& info, size_t chunk_bytes,
                                               bool first, bool last) {
  using M = StreamResponseProto;
  const size_t chunk = std::max<size_t>(1, chunk_bytes / sizeof(float));  // floats
  const size_t total = rows->size();
  std::vector<grpc::ByteBuffer> out;
  size_t done = 0;
  do {
    const size_t n = std::min(chunk, total - done);
    ProtoWriter w;
    w.VarintField(M::kCallIdFieldNumber, call_id);
    w.VarintField(M::kVersionFieldNumber, static_cast<uint64_t>(version));
    if (out.empty() && first) {
      WriteIncarnation(&w, M::kIncarnationFieldNumber, info.incarnation);
      WriteOutcome(&w, M::kPushOutcomeFieldNumber, info.outcome);
    }
    if (n > 0) {
      w.LengthPrefix(M::kRowsFieldNumber, n * sizeof(float));
      w.Data(rows->data() + done, n * sizeof(float), rows);
    }
    done += n;
    if (done == total && last) w.VarintField(M::kLastFieldNumber, 1);
    out.push_back(w.Finish());
  } while (done < total);
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

absl::Status DecodeStreamRequest(const Pieces& bytes, RawStreamRequest* out) {
  using M = StreamRequestProto;
  return ForEachField(bytes, "StreamRequest", [out](FieldReader& f) {
    const int field = f.number();
    if (f.Is(M::kGradientsFieldNumber, kLen)) return ReadSliceField(f, "gradient", &out->gradients);
    if (field >= M::kCallIdFieldNumber && field <= M::kLastFieldNumber &&
        f.wire_type() == kVarint) {
      uint64_t v;
      if (absl::Status s = f.Varint("bad varint", &v); !s.ok()) return s;
      StreamCallHeader& h = out->header;
      switch (field) {
        case M::kCallIdFieldNumber:
          h.call_id = v;
          break;
        case M::kKindFieldNumber:
          if (v > static_cast<uint64_t>(StreamCall::kPushPullRows)) {
            return f.Error(absl::StrCat("unknown call kind ", v));
          }
          h.kind = static_cast<StreamCall>(v);
          break;
        case M::kWorkerIdFieldNumber:
          h.worker_id = static_cast<int32_t>(v);
          break;
        case M::kVersionFieldNumber:
          h.version = static_cast<int64_t>(v);
          break;
        case M::kMinVersionFieldNumber:
          h.min_version = static_cast<int64_t>(v);
          break;
        case M::kWaitTimeoutMsFieldNumber:
          h.wait_timeout_ms = static_cast<int64_t>(v);
          break;
        case M::kLastFieldNumber:
          out->last = v != 0;
          break;
        default:
          break;  // gradients sent as a varint: read and ignored
      }
      return absl::OkStatus();
    }
    if (f.Is(M::kSeqFieldNumber, kVarint)) return f.Int<int64_t>("bad seq", &out->header.seq);
    if (f.Is(M::kWeightsDtypeFieldNumber, kVarint)) {
      return ReadWeightsDtype(f, &out->header.weights_dtype);
    }
    if (f.Is(M::kTableFieldNumber, kLen)) return f.String("bad table", &out->header.table);
    if (f.Is(M::kPrefetchFieldNumber, kVarint)) {
      uint64_t v;
      if (absl::Status s = f.Varint("bad prefetch", &v); !s.ok()) return s;
      out->header.prefetch = v != 0;
      return absl::OkStatus();
    }
    if (f.Is(M::kRowGradsFieldNumber, kLen)) return f.Bytes("bad row_grads", &out->row_grads);
    if (f.Is(M::kIdsFieldNumber, kLen)) {  // packed
      Pieces p;
      if (absl::Status s = f.Bytes("bad ids", &p); !s.ok()) return s;
      const size_t bytes = PiecesSize(p);
      if (bytes % sizeof(uint64_t) != 0) return f.Error("ids not whole fixed64s");
      const size_t old = out->ids.size();
      out->ids.resize(old + bytes / sizeof(uint64_t));
      CopyPieces(p, out->ids.data() + old);
      return absl::OkStatus();
    }
    if (f.Is(M::kIdsFieldNumber, kFixed64)) {  // unpacked, as parsers must accept
      Pieces p;
      if (!f.reader().ReadPieces(sizeof(uint64_t), &p)) return f.Error("bad ids");
      out->ids.emplace_back();
      CopyPieces(p, &out->ids.back());
      return absl::OkStatus();
    }
    return f.Skip();
  });
}

absl::Status DecodeStreamResponse(const Pieces& bytes, RawStreamResponse* out) {
  using M = StreamResponseProto;
  int64_t code = 0;
  std::string message;
  const absl::Status status = ForEachField(bytes, "StreamResponse", [&](FieldReader& f) {
    const int field = f.number();
    if (f.Is(M::kWeightsFieldNumber, kLen)) return ReadSliceField(f, "weights", &out->weights);
    if (f.Is(M::kRowsFieldNumber, kLen)) return f.Bytes("bad rows", &out->rows);
    if (f.Is(M::kErrorMessageFieldNumber, kLen)) return f.String("bad error message", &message);
    if (f.Is(M::kIncarnationFieldNumber, kLen)) return ReadIncarnation(f, &out->info.incarnation);
    if (f.Is(M::kPushOutcomeFieldNumber, kVarint)) {
      return ReadOutcome(f, "bad push_outcome", &out->info.outcome);
    }
    if (field >= M::kCallIdFieldNumber && field <= M::kErrorCodeFieldNumber &&
        f.wire_type() == kVarint) {
      uint64_t v;
      if (absl::Status s = f.Varint("bad varint", &v); !s.ok()) return s;
      if (field == M::kCallIdFieldNumber) out->call_id = v;
      if (field == M::kVersionFieldNumber) out->version = static_cast<int64_t>(v);
      if (field == M::kLastFieldNumber) out->last = v != 0;
      if (field == M::kErrorCodeFieldNumber) code = static_cast<int64_t>(v);
      return absl::OkStatus();
    }
    return f.Skip();
  });
  if (status.ok() && code != 0) {
    out->status = absl::Status(static_cast<absl::StatusCode>(code), message);
  }
  return status;
}

}  // namespace ps
