// A generic protobuf wire-format writer and reader that copy no bulk data,
// and the one field loop every raw decoder (rpc/raw_wire.h) is written with.
//
//   - ProtoWriter builds a grpc::ByteBuffer from small owned header slices
//     and data slices that point at the caller's bytes (borrowed, or kept
//     alive by a shared owner), so sending copies nothing in user space;
//   - ProtoReader walks a received message's pieces (the slices of a
//     ByteBuffer, see Receive) in place, handing out length-delimited fields
//     as lists of pieces that the caller copies once, straight into their
//     destination;
//   - ForEachField runs a message's fields through a handler, with the
//     decoders' common error messages ("malformed <Message>: <what>").
//
// Knows nothing of ps.v1's messages. Not thread-safe; each object belongs to
// one call.
#ifndef PS_RPC_PROTO_CODEC_H_
#define PS_RPC_PROTO_CODEC_H_

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "common/slice_assembler.h"
#include "grpcpp/support/byte_buffer.h"
#include "grpcpp/support/slice.h"

namespace ps {

// Wire types.
inline constexpr int kVarint = 0, kFixed64 = 1, kLen = 2, kFixed32 = 5;

// Encoded size of a varint.
inline size_t VarintSize(uint64_t v) {
  size_t n = 1;
  while (v >= 0x80) {
    v >>= 7;
    ++n;
  }
  return n;
}

// Builds a ByteBuffer holding one protobuf message.
class ProtoWriter {
 public:
  // Field headers and scalar fields go into owned header bytes. (Inline:
  // the encoders call them per field.)
  void Varint(uint64_t v) {
    while (v >= 0x80) {
      header_.push_back(static_cast<char>(v | 0x80));
      v >>= 7;
    }
    header_.push_back(static_cast<char>(v));
  }
  void Tag(int field, int wire_type) { Varint((static_cast<uint64_t>(field) << 3) | wire_type); }
  // proto int32/int64 (negative as 10 bytes)
  void VarintField(int field, uint64_t v) {
    Tag(field, kVarint);
    Varint(v);
  }
  void LengthPrefix(int field, uint64_t len) {
    Tag(field, kLen);
    Varint(len);
  }
  void BytesField(int field, absl::string_view bytes);  // copied
  // Appends `len` bytes at `data` without copying. `owner` (may be null: then
  // the caller keeps the bytes alive until the call completes) is released
  // when gRPC is done with them.
  void Data(const void* data, size_t len, std::shared_ptr<const void> owner);

  grpc::ByteBuffer Finish();

 private:
  void FlushHeader();
  std::string header_;
  std::vector<grpc::Slice> slices_;
};

// Reads one protobuf message in place from a sequence of pieces.
class ProtoReader {
 public:
  explicit ProtoReader(Pieces pieces) : pieces_(std::move(pieces)) {}

  // True once every byte was consumed.
  bool done() {
    Normalize();
    return piece_ == pieces_.size();
  }
  // Each returns false on truncated or malformed input.
  bool ReadVarint(uint64_t* v);
  bool ReadTag(int* field, int* wire_type);
  // The next `len` bytes, as views into the pieces.
  bool ReadPieces(uint64_t len, Pieces* out);
  // At most 1 MiB (names and messages are short).
  bool ReadString(uint64_t len, std::string* out);
  // Skips a field of `wire_type` whose tag was just read.
  bool SkipField(int wire_type);

 private:
  // Moves past exhausted (or empty) pieces.
  void Normalize() {
    while (piece_ < pieces_.size() && pos_ == pieces_[piece_].size()) {
      ++piece_;
      pos_ = 0;
    }
  }

  Pieces pieces_;
  size_t piece_ = 0;  // current piece
  size_t pos_ = 0;    // offset in it
};

// A received ByteBuffer, kept alive with views of its slices.
struct ReceivedBytes {
  std::vector<grpc::Slice> slices;
  Pieces pieces;
};
absl::Status Receive(const grpc::ByteBuffer& buffer, ReceivedBytes* out);

// INVALID_ARGUMENT "malformed <message>: <what>": the decoders' one error.
absl::Status Malformed(absl::string_view message, absl::string_view what);

// One field of a message being decoded by ForEachField: its number and wire
// type (the tag was read), and reads of its value that fail with
// Malformed(message, what).
class FieldReader {
 public:
  FieldReader(ProtoReader* r, absl::string_view message, int number, int wire_type)
      : r_(r), message_(message), number_(number), wire_type_(wire_type) {}

  int number() const { return number_; }
  int wire_type() const { return wire_type_; }
  bool Is(int number, int wire_type) const {
    return number_ == number && wire_type_ == wire_type;
  }
  ProtoReader& reader() { return *r_; }

  absl::Status Error(absl::string_view what) const { return Malformed(message_, what); }

  // The varint value.
  absl::Status Varint(absl::string_view what, uint64_t* v) {
    return r_->ReadVarint(v) ? absl::OkStatus() : Error(what);
  }
  // The varint value as the proto integer type `Proto` (int32 truncates,
  // as protobuf does), stored in `out`; `out` is left as it is on error.
  template <typename Proto, typename T>
  absl::Status Int(absl::string_view what, T* out) {
    uint64_t v;
    if (!r_->ReadVarint(&v)) return Error(what);
    *out = static_cast<Proto>(v);
    return absl::OkStatus();
  }
  // A length-delimited value, in place.
  absl::Status Bytes(absl::string_view what, Pieces* out) {
    uint64_t len;
    return r_->ReadVarint(&len) && r_->ReadPieces(len, out) ? absl::OkStatus() : Error(what);
  }
  // A length-delimited value, copied (at most 1 MiB).
  absl::Status String(absl::string_view what, std::string* out) {
    uint64_t len;
    return r_->ReadVarint(&len) && r_->ReadString(len, out) ? absl::OkStatus() : Error(what);
  }
  // Skips the field (one the message does not know, or of the wrong type).
  absl::Status Skip() {
    return r_->SkipField(wire_type_) ? absl::OkStatus()
                                     : Error(absl::StrCat("bad field ", number_));
  }

 private:
  ProtoReader* const r_;
  const absl::string_view message_;
  const int number_;
  const int wire_type_;
};

// Decodes the message `message` in `bytes` field by field: calls
// `on_field(FieldReader&)` for each, in order; it reads the value (or calls
// Skip()) and returns OK, or an error that ends the decoding and is returned
// as it is. A tag that does not parse is Malformed(message, "bad tag").
template <typename OnField>
absl::Status ForEachField(const Pieces& bytes, absl::string_view message, OnField&& on_field) {
  ProtoReader r(bytes);
  while (!r.done()) {
    int number, wire_type;
    if (!r.ReadTag(&number, &wire_type)) return Malformed(message, "bad tag");
    FieldReader field(&r, message, number, wire_type);
    if (absl::Status s = on_field(field); !s.ok()) return s;
  }
  return absl::OkStatus();
}

}  // namespace ps

#endif  // PS_RPC_PROTO_CODEC_H_
