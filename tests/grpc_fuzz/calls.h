// Calls to a server as raw bytes, for the gRPC fuzz test: unary calls
// through grpc::GenericStub (so malformed messages reach the server's own
// decoders), a Stream call driven message by message (ScriptedStream), and
// how to tell a status the server sent from one the client made up.
// Thread-safe functions; each ScriptedStream belongs to one thread.
#ifndef PS_TESTS_GRPC_FUZZ_CALLS_H_
#define PS_TESTS_GRPC_FUZZ_CALLS_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "grpcpp/generic/generic_stub.h"
#include "grpcpp/grpcpp.h"
#include "grpcpp/support/client_callback.h"
#include "proto/ps.pb.h"

namespace ps {
namespace grpc_fuzz {

// Every client call's deadline: well past anything the server may
// legitimately wait (kPullTimeoutS, or --call_timeout), with slack for
// a loaded 2-core machine. A call that reaches it got no status from the
// server, which fails the test.
inline constexpr absl::Duration kClientDeadline = absl::Seconds(10);

// The method path of the bidirectional Stream RPC.
inline constexpr char kStreamMethod[] = "/ps.v1.ParameterServer/Stream";

grpc::ByteBuffer ToBuffer(const std::string& bytes);
std::string ToString(const grpc::ByteBuffer& buffer);

// The last value of varint field `field` at the top level of `bytes`.
std::optional<uint64_t> VarintField(const std::string& bytes, int field);

// Why `bytes` do not parse as a StreamResponse: proto3 requires its string
// field error_message to be UTF-8, which an error echoing request bytes may
// not be; or the framing is broken.
std::string WhyNotStreamResponse(const std::string& bytes);

std::string CodeName(grpc::StatusCode c);
// "CODE: message" (the message cut at 300 bytes).
std::string Describe(const grpc::Status& s);

// A RESOURCE_EXHAUSTED the client made up: a status or header from the
// server was over the client's metadata limit (8 KiB by default, as in
// ps_worker). gRPC then fails every call on that connection, not only the
// one with the long status.
bool MetadataTooLarge(const grpc::Status& s);

// A DEADLINE_EXCEEDED the client made up: the server never answered. The
// server's own deadline errors say "gave up after" (a wait) or name
// --call_timeout (a stream call that never arrived in full).
bool ClientGaveUp(const grpc::Status& s);

// A channel of its own (no shared subchannel), without message size limits.
std::shared_ptr<grpc::Channel> NewChannel(const std::string& address);

struct UnaryResult {
  grpc::Status status;
  std::string response;
  bool we_cancelled = false;  // TryCancel'ed before the call completed
  absl::Duration took;
};

// One unary call of `method` with `request` as its bytes; cancelled after
// `cancel_after` unless it completed. Blocks until it completes.
UnaryResult CallUnary(grpc::GenericStub* stub, const std::string& method,
                      const std::string& request,
                      absl::Duration cancel_after = absl::InfiniteDuration());

// A Stream call driven step by step from one thread: each Write blocks until
// gRPC took the message; responses are read all the time in the background.
// The call ends (OnDone) only after Release(), once the server finished it,
// the client cancelled it, or its deadline passed.
class ScriptedStream final : public grpc::ClientBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  // A call's final StreamResponse (last = true).
  struct Answer {
    uint64_t call_id = 0;
    int code = 0;  // StreamResponse.error_code
    std::string message;
    int64_t version = 0;
  };

  ScriptedStream(grpc::GenericStub* stub, absl::Duration deadline) {
    ctx_.set_deadline(absl::ToChronoTime(absl::Now() + deadline));
    stub->PrepareBidiStreamingCall(&ctx_, kStreamMethod, grpc::StubOptions(), this);
    AddHold();  // writes start outside reactions; see Release()
    StartRead(&in_);
    StartCall();
  }

  ~ScriptedStream() override {
    Release();
    ctx_.TryCancel();  // no-op once done
    absl::MutexLock l(&mu_);
    mu_.Await(absl::Condition(&done_));
  }

  ScriptedStream(const ScriptedStream&) = delete;
  ScriptedStream& operator=(const ScriptedStream&) = delete;

  // False once a write failed (the stream ended; its status tells why).
  bool Write(const std::string& bytes) {
    {
      absl::MutexLock l(&mu_);
      if (write_failed_ || released_ || writes_done_) return false;
      writing_ = true;
    }
    out_ = ToBuffer(bytes);
    StartWrite(&out_);
    absl::MutexLock l(&mu_);
    auto written = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return !writing_; };
    mu_.Await(absl::Condition(&written));
    return !write_failed_;
  }

  // Half-closes: no more requests.
  void WritesDone() {
    {
      absl::MutexLock l(&mu_);
      if (writes_done_ || released_) return;
      writes_done_ = true;
    }
    StartWritesDone();
  }

  void Cancel() { ctx_.TryCancel(); }

  // No more operations from the script: lets the call end.
  void Release() {
    {
      absl::MutexLock l(&mu_);
      if (released_) return;
      released_ = true;
    }
    RemoveHold();
  }

  // Waits until call `call_id` was answered or the server ended the stream,
  // at most until `until`. True if either happened.
  bool WaitAnsweredOrEnded(uint64_t call_id, absl::Time until) {
    absl::MutexLock l(&mu_);
    auto ready = [this, call_id]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
      if (reads_ended_) return true;
      for (const Answer& a : answers_) {
        if (a.call_id == call_id) return true;
      }
      return false;
    };
    return mu_.AwaitWithDeadline(absl::Condition(&ready), until);
  }

  // The call's status once it ended; nullopt if it had not by `until`.
  // REQUIRES: Release() was called.
  std::optional<grpc::Status> WaitDone(absl::Time until) {
    absl::MutexLock l(&mu_);
    if (!mu_.AwaitWithDeadline(absl::Condition(&done_), until)) return std::nullopt;
    return status_;
  }

  std::vector<Answer> answers() {
    absl::MutexLock l(&mu_);
    return answers_;
  }
  // Responses that did not parse, and why the first did not.
  int unparsable() {
    absl::MutexLock l(&mu_);
    return unparsable_;
  }
  std::string unparsable_why() {
    absl::MutexLock l(&mu_);
    return unparsable_why_;
  }

  void OnWriteDone(bool ok) override {
    absl::MutexLock l(&mu_);
    writing_ = false;
    if (!ok) write_failed_ = true;
  }

  void OnReadDone(bool ok) override {
    if (!ok) {
      absl::MutexLock l(&mu_);
      reads_ended_ = true;
      return;
    }
    v1::StreamResponse r;
    const bool parsed = r.ParseFromString(ToString(in_));
    {
      absl::MutexLock l(&mu_);
      if (!parsed) {
        if (unparsable_++ == 0) unparsable_why_ = WhyNotStreamResponse(ToString(in_));
      } else if (r.last()) {
        answers_.push_back({r.call_id(), r.error_code(), r.error_message(), r.version()});
      }
    }
    StartRead(&in_);
  }

  void OnDone(const grpc::Status& s) override {
    absl::MutexLock l(&mu_);
    status_ = s;
    done_ = true;
  }

 private:
  grpc::ClientContext ctx_;
  grpc::ByteBuffer in_;   // only the read path touches it
  grpc::ByteBuffer out_;  // the message being written; one at a time

  absl::Mutex mu_;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool write_failed_ ABSL_GUARDED_BY(mu_) = false;
  bool writes_done_ ABSL_GUARDED_BY(mu_) = false;
  bool released_ ABSL_GUARDED_BY(mu_) = false;
  bool reads_ended_ ABSL_GUARDED_BY(mu_) = false;
  bool done_ ABSL_GUARDED_BY(mu_) = false;
  grpc::Status status_ ABSL_GUARDED_BY(mu_);
  std::vector<Answer> answers_ ABSL_GUARDED_BY(mu_);
  int unparsable_ ABSL_GUARDED_BY(mu_) = 0;
  std::string unparsable_why_ ABSL_GUARDED_BY(mu_);
};

}  // namespace grpc_fuzz
}  // namespace ps

#endif  // PS_TESTS_GRPC_FUZZ_CALLS_H_
