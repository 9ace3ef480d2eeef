#include "rpc/raw_unary.h"

#include "proto/ps.pb.h"

namespace ps {
namespace {

using PushRequestProto = v1::PushRequest;
using PushPullRequestProto = v1::PushPullRequest;
using PullRequestProto = v1::PullRequest;
using PullResponseProto = v1::PullResponse;

size_t PushRequestSize(int worker_id, int64_t version, const ModelSpec& spec,
                       const std::vector<SliceRange>& slices, int64_t seq, WireDtype dtype) {
  size_t n = 1 + VarintSize(static_cast<uint64_t>(int64_t{worker_id})) + 1 +
             VarintSize(static_cast<uint64_t>(version));
  if (seq != 0) n += 1 + VarintSize(static_cast<uint64_t>(seq));
  for (const SliceRange& r : slices) {
    const size_t ts = TensorSliceSize(spec[r.tensor_index], r, dtype);
    n += 1 + VarintSize(ts) + ts;
  }
  return n;
}

void WritePushRequest(ProtoWriter* w, int worker_id, int64_t version, const ModelSpec& spec,
                      const std::vector<SliceRange>& slices, const SliceValues& values,
                      int64_t seq, WireDtype dtype) {
  w->VarintField(PushRequestProto::kWorkerIdFieldNumber,
                 static_cast<uint64_t>(int64_t{worker_id}));
  w->VarintField(PushRequestProto::kVersionFieldNumber, static_cast<uint64_t>(version));
  if (seq != 0) w->VarintField(PushRequestProto::kSeqFieldNumber, static_cast<uint64_t>(seq));
  for (const SliceRange& r : slices) {
    WriteTensorSlice(w, PushRequestProto::kGradientsFieldNumber, spec[r.tensor_index], r,
                     values(r), nullptr, dtype);
  }
}

}  // namespace

grpc::ByteBuffer EncodePushRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                   const std::vector<SliceRange>& slices,
                                   const SliceValues& values, int64_t seq, WireDtype dtype) {
  ProtoWriter w;
  WritePushRequest(&w, worker_id, version, spec, slices, values, seq, dtype);
  return w.Finish();
}

grpc::ByteBuffer EncodePushPullRequest(int worker_id, int64_t version, const ModelSpec& spec,
                                       const std::vector<SliceRange>& slices,
                                       const SliceValues& values, int64_t min_version,
                                       int64_t wait_timeout_ms, int64_t seq, WireDtype dtype) {
  ProtoWriter w;
  w.LengthPrefix(PushPullRequestProto::kPushFieldNumber,
                 PushRequestSize(worker_id, version, spec, slices, seq, dtype));
  WritePushRequest(&w, worker_id, version, spec, slices, values, seq, dtype);
  w.VarintField(PushPullRequestProto::kMinVersionFieldNumber, static_cast<uint64_t>(min_version));
  w.VarintField(PushPullRequestProto::kWaitTimeoutMsFieldNumber,
                static_cast<uint64_t>(wait_timeout_ms));
  WriteWeightsDtype(&w, PushPullRequestProto::kWeightsDtypeFieldNumber, dtype);
  return w.Finish();
}

grpc::ByteBuffer EncodePullRequest(int worker_id, int64_t min_version, int64_t wait_timeout_ms,
                                   WireDtype weights_dtype) {
  ProtoWriter w;
  w.VarintField(PullRequestProto::kWorkerIdFieldNumber, static_cast<uint64_t>(int64_t{worker_id}));
  w.VarintField(PullRequestProto::kMinVersionFieldNumber, static_cast<uint64_t>(min_version));
  w.VarintField(PullRequestProto::kWaitTimeoutMsFieldNumber,
                static_cast<uint64_t>(wait_timeout_ms));
  WriteWeightsDtype(&w, PullRequestProto::kWeightsDtypeFieldNumber, weights_dtype);
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
                                    const ReplyInfo& info, WireDtype dtype) {
  ProtoWriter w;
  w.VarintField(PullResponseProto::kVersionFieldNumber, static_cast<uint64_t>(version));
  WriteIncarnation(&w, PullResponseProto::kIncarnationFieldNumber, info.incarnation);
  WriteOutcome(&w, PullResponseProto::kPushOutcomeFieldNumber, info.outcome);
  for (const SliceRange& r : slices) {
    WriteTensorSlice(&w, PullResponseProto::kWeightsFieldNumber, spec[r.tensor_index], r,
                     values(r), owner, dtype);
  }
  return w.Finish();
}

absl::Status DecodePushRequest(const Pieces& bytes, RawPush* out) {
  using M = PushRequestProto;
  return ForEachField(bytes, "PushRequest", [out](FieldReader& f) {
    if (f.Is(M::kWorkerIdFieldNumber, kVarint)) {
      return f.Int<int32_t>("bad worker_id", &out->worker_id);
    }
    if (f.Is(M::kVersionFieldNumber, kVarint)) return f.Int<int64_t>("bad version", &out->version);
    if (f.Is(M::kSeqFieldNumber, kVarint)) return f.Int<int64_t>("bad seq", &out->seq);
    if (f.Is(M::kGradientsFieldNumber, kLen)) return ReadSliceField(f, "gradient", &out->gradients);
    return f.Skip();
  });
}

absl::Status DecodePushPullRequest(const Pieces& bytes, RawPush* push, RawPull* pull) {
  using M = PushPullRequestProto;
  const absl::Status status = ForEachField(bytes, "PushPullRequest", [push, pull](FieldReader& f) {
    if (f.Is(M::kPushFieldNumber, kLen)) {
      Pieces p;
      if (absl::Status s = f.Bytes("truncated push", &p); !s.ok()) return s;
      return DecodePushRequest(p, push);
    }
    if (f.Is(M::kMinVersionFieldNumber, kVarint)) {
      return f.Int<int64_t>("bad varint", &pull->min_version);
    }
    if (f.Is(M::kWaitTimeoutMsFieldNumber, kVarint)) {
      return f.Int<int64_t>("bad varint", &pull->wait_timeout_ms);
    }
    if (f.Is(M::kWeightsDtypeFieldNumber, kVarint)) {
      return ReadWeightsDtype(f, &pull->weights_dtype);
    }
    return f.Skip();
  });
  if (status.ok()) pull->worker_id = push->worker_id;
  return status;
}

absl::Status DecodePullRequest(const Pieces& bytes, RawPull* out) {
  using M = PullRequestProto;
  return ForEachField(bytes, "PullRequest", [out](FieldReader& f) {
    if (f.number() >= M::kWorkerIdFieldNumber && f.number() <= M::kWaitTimeoutMsFieldNumber &&
        f.wire_type() == kVarint) {
      uint64_t v;
      if (absl::Status s = f.Varint("bad varint", &v); !s.ok()) return s;
      if (f.number() == M::kWorkerIdFieldNumber) out->worker_id = static_cast<int32_t>(v);
      if (f.number() == M::kMinVersionFieldNumber) out->min_version = static_cast<int64_t>(v);
      if (f.number() == M::kWaitTimeoutMsFieldNumber) {
        out->wait_timeout_ms = static_cast<int64_t>(v);
      }
      return absl::OkStatus();
    }
    if (f.Is(M::kWeightsDtypeFieldNumber, kVarint)) return ReadWeightsDtype(f, &out->weights_dtype);
    return f.Skip();
  });
}

absl::Status DecodePullResponse(const Pieces& bytes, int64_t* version,
                                std::vector<RawTensorSlice>* weights, ReplyInfo* info) {
  using M = PullResponseProto;
  ReplyInfo ignored;
  if (info == nullptr) info = &ignored;
  return ForEachField(bytes, "PullResponse", [version, weights, info](FieldReader& f) {
    if (f.Is(M::kVersionFieldNumber, kVarint)) return f.Int<int64_t>("bad version", version);
    if (f.Is(M::kWeightsFieldNumber, kLen)) return ReadSliceField(f, "weights", weights);
    if (f.Is(M::kIncarnationFieldNumber, kLen)) return ReadIncarnation(f, &info->incarnation);
    if (f.Is(M::kPushOutcomeFieldNumber, kVarint)) {
      return ReadOutcome(f, "bad push_outcome", &info->outcome);
    }
    return f.Skip();
  });
}

absl::Status DecodePushResponse(const Pieces& bytes, int64_t* version, ReplyInfo* info) {
  using M = v1::PushResponse;
  return ForEachField(bytes, "PushResponse", [version, info](FieldReader& f) {
    if (f.Is(M::kVersionFieldNumber, kVarint)) return f.Int<int64_t>("bad version", version);
    if (f.Is(M::kIncarnationFieldNumber, kLen)) return ReadIncarnation(f, &info->incarnation);
    if (f.Is(M::kOutcomeFieldNumber, kVarint)) return ReadOutcome(f, "bad outcome", &info->outcome);
    return f.Skip();
  });
}

}  // namespace ps
