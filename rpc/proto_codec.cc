#include "rpc/proto_codec.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ps {
namespace {

// Releases the shared owner of a data slice when gRPC drops the slice.
void ReleaseOwner(void* p) { delete static_cast<std::shared_ptr<const void>*>(p); }

}  // namespace

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

absl::Status Malformed(absl::string_view message, absl::string_view what) {
  return absl::InvalidArgumentError(absl::StrCat("malformed ", message, ": ", what));
}

}  // namespace ps
