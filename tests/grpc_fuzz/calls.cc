#include "tests/grpc_fuzz/calls.h"

#include <climits>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "google/protobuf/io/coded_stream.h"
#include "google/protobuf/wire_format_lite.h"
#include "grpcpp/create_channel.h"
#include "rpc/credentials.h"

namespace ps {
namespace grpc_fuzz {

using grpc::StatusCode;

grpc::ByteBuffer ToBuffer(const std::string& bytes) {
  grpc::Slice slice(bytes);
  return grpc::ByteBuffer(&slice, 1);
}

std::string ToString(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  std::string out;
  if (!buffer.Valid() || !buffer.Dump(&slices).ok()) return out;
  for (const grpc::Slice& s : slices)
    out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

std::optional<uint64_t> VarintField(const std::string& bytes, int field) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  std::optional<uint64_t> found;
  while (const uint32_t tag = in.ReadTag()) {
    if (WireFormatLite::GetTagFieldNumber(tag) == field &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_VARINT) {
      uint64_t v;
      if (!in.ReadVarint64(&v)) return std::nullopt;
      found = v;
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      return std::nullopt;
    }
  }
  return found;
}

std::string WhyNotStreamResponse(const std::string& bytes) {
  using google::protobuf::internal::WireFormatLite;
  google::protobuf::io::CodedInputStream in(reinterpret_cast<const uint8_t*>(bytes.data()),
                                            static_cast<int>(bytes.size()));
  while (const uint32_t tag = in.ReadTag()) {
    std::string message;
    uint32_t len;
    if (WireFormatLite::GetTagFieldNumber(tag) == 6 &&
        WireFormatLite::GetTagWireType(tag) == WireFormatLite::WIRETYPE_LENGTH_DELIMITED) {
      if (!in.ReadVarint32(&len) || !in.ReadString(&message, len)) break;
      if (!google::protobuf::internal::IsStructurallyValidUTF8(message)) {
        return absl::StrCat("its error_message (a proto3 string) is not UTF-8: \"",
                            absl::CHexEscape(message.substr(0, 120)), "\"");
      }
    } else if (!WireFormatLite::SkipField(&in, tag)) {
      break;
    }
  }
  return "malformed";
}

std::string CodeName(StatusCode c) {
  static const char* const kNames[] = {"OK",
                                       "CANCELLED",
                                       "UNKNOWN",
                                       "INVALID_ARGUMENT",
                                       "DEADLINE_EXCEEDED",
                                       "NOT_FOUND",
                                       "ALREADY_EXISTS",
                                       "PERMISSION_DENIED",
                                       "RESOURCE_EXHAUSTED",
                                       "FAILED_PRECONDITION",
                                       "ABORTED",
                                       "OUT_OF_RANGE",
                                       "UNIMPLEMENTED",
                                       "INTERNAL",
                                       "UNAVAILABLE",
                                       "DATA_LOSS",
                                       "UNAUTHENTICATED"};
  const int i = static_cast<int>(c);
  return i >= 0 && i < 17 ? kNames[i] : absl::StrCat("code ", i);
}

std::string Describe(const grpc::Status& s) {
  std::string m = s.error_message().substr(0, 300);
  return m.empty() ? CodeName(s.error_code()) : absl::StrCat(CodeName(s.error_code()), ": ", m);
}
bool MetadataTooLarge(const grpc::Status& s) {
  return s.error_code() == StatusCode::RESOURCE_EXHAUSTED &&
         absl::StrContains(s.error_message(), "metadata size exceeds limit");
}

bool ClientGaveUp(const grpc::Status& s) {
  return s.error_code() == StatusCode::DEADLINE_EXCEEDED &&
         !absl::StrContains(s.error_message(), "gave up after") &&
         !absl::StrContains(s.error_message(), "--call_timeout");
}

std::shared_ptr<grpc::Channel> NewChannel(const std::string& address) {
  grpc::ChannelArguments args;
  args.SetMaxReceiveMessageSize(INT_MAX);
  args.SetMaxSendMessageSize(INT_MAX);
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection of its own
  return grpc::CreateCustomChannel(address, ps::MakeChannelCredentials(), args);
}

UnaryResult CallUnary(grpc::GenericStub* stub, const std::string& method,
                      const std::string& request, absl::Duration cancel_after) {
  const absl::Time start = absl::Now();
  grpc::ClientContext ctx;
  ctx.set_deadline(absl::ToChronoTime(start + kClientDeadline));
  grpc::ByteBuffer req = ToBuffer(request), resp;
  absl::Notification done;
  UnaryResult r;
  stub->UnaryCall(&ctx, method, grpc::StubOptions(), &req, &resp, [&](grpc::Status s) {
    r.status = std::move(s);
    done.Notify();
  });
  if (cancel_after != absl::InfiniteDuration() &&
      !done.WaitForNotificationWithTimeout(cancel_after)) {
    ctx.TryCancel();
    r.we_cancelled = true;
  }
  done.WaitForNotification();
  r.took = absl::Now() - start;
  if (r.status.ok()) r.response = ToString(resp);
  return r;
}
}  // namespace grpc_fuzz
}  // namespace ps
