#include "client/internal/shard_stream.h"

#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "rpc/wire.h"

namespace ps {

ShardStream::ShardStream(grpc::GenericStub* stub) {
  stub->PrepareBidiStreamingCall(&ctx_, "/ps.v1.ParameterServer/Stream", grpc::StubOptions(),
                                 this);
  StartRead(&in_);
  // Lets Call() start writes at any time: without a hold, gRPC could end the
  // stream between a read failing and a write starting. Released once the
  // stream broke and no write can start any more, or in the destructor.
  AddHold();
  StartCall();
}

ShardStream::~ShardStream() {
  bool idle, done, release;
  {
    absl::MutexLock l(&mu_);
    idle = !writing_ && queue_.empty() && call_id_ == 0 && !broken_;
    done = done_;
    release = !hold_released_;
    hold_released_ = true;
    broken_ = true;  // no further writes
  }
  if (!done) {
    if (idle) {
      StartWritesDone();  // the server then ends the stream
    } else {
      ctx_.TryCancel();
    }
  }
  if (release) RemoveHold();
  absl::MutexLock l(&mu_);
  auto finished = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return done_; };
  if (!mu_.AwaitWithTimeout(absl::Condition(&finished), absl::Seconds(10))) {
    ctx_.TryCancel();  // a server that does not close the stream
    mu_.Await(absl::Condition(&finished));
  }
}

bool ShardStream::broken() {
  absl::MutexLock l(&mu_);
  return broken_;
}

bool ShardStream::busy() {
  absl::MutexLock l(&mu_);
  return call_id_ != 0;
}

void ShardStream::Cancel() { ctx_.TryCancel(); }

void ShardStream::Call(uint64_t call_id, std::vector<grpc::ByteBuffer> requests,
                       ResponseHandler on_response, DoneHandler done) {
  const grpc::ByteBuffer* next = nullptr;
  bool started = false;
  {
    absl::MutexLock l(&mu_);
    if (!broken_ && call_id_ == 0) {
      started = true;
      call_id_ = call_id;
      on_response_ = std::move(on_response);
      on_done_ = std::move(done);
      call_status_ = absl::OkStatus();
      for (grpc::ByteBuffer& b : requests) queue_.push_back(std::move(b));
      next = NextWriteLocked();
    }
  }
  if (next != nullptr) {
    StartWrite(next);
    return;
  }
  if (started) return;
  done(broken() ? absl::UnavailableError("the stream to this shard is broken")
                : absl::InternalError("ShardStream::Call while another call is in flight"));
}

void ShardStream::Append(uint64_t call_id, std::vector<grpc::ByteBuffer> requests) {
  const grpc::ByteBuffer* next = nullptr;
  {
    absl::MutexLock l(&mu_);
    if (broken_ || call_id_ != call_id) return;
    for (grpc::ByteBuffer& b : requests) queue_.push_back(std::move(b));
    next = NextWriteLocked();
  }
  if (next != nullptr) StartWrite(next);
}

const grpc::ByteBuffer* ShardStream::NextWriteLocked() {
  if (writing_ || queue_.empty() || broken_) return nullptr;
  writing_ = true;
  return &queue_.front();  // stays put until popped in OnWriteDone
}

void ShardStream::OnWriteDone(bool ok) {
  const grpc::ByteBuffer* next = nullptr;
  {
    absl::MutexLock l(&mu_);
    writing_ = false;
    queue_.pop_front();
    if (!ok) {
      broken_ = true;  // OnDone follows with the reason
      queue_.clear();
    }
    next = NextWriteLocked();
  }
  if (next != nullptr) StartWrite(next);
  MaybeReleaseHold();
}

void ShardStream::MaybeReleaseHold() {
  {
    absl::MutexLock l(&mu_);
    if (hold_released_ || !broken_ || writing_) return;
    hold_released_ = true;
  }
  RemoveHold();
}

void ShardStream::OnReadDone(bool ok) {
  if (!ok) {
    // The stream ended; OnDone reports why once nothing else is in flight.
    {
      absl::MutexLock l(&mu_);
      broken_ = true;
    }
    MaybeReleaseHold();
    return;
  }
  ReceivedBytes bytes;
  RawStreamResponse resp;
  absl::Status s = Receive(in_, &bytes);
  if (s.ok()) s = DecodeStreamResponse(bytes.pieces, &resp);
  ResponseHandler handler;
  {
    absl::MutexLock l(&mu_);
    if (s.ok() && resp.call_id != call_id_) {
      s = absl::InternalError(absl::StrCat("response for call ", resp.call_id,
                                           " while call ", call_id_, " is in flight"));
    }
    handler = on_response_;
  }
  if (!s.ok()) {
    // The stream is out of step: break it; OnDone fails the call.
    {
      absl::MutexLock l(&mu_);
      if (call_status_.ok()) call_status_ = s;
      broken_ = true;
    }
    ctx_.TryCancel();
    return;
  }
  absl::Status call_status = resp.status;
  if (call_status.ok() && handler) call_status = handler(resp);
  {
    absl::MutexLock l(&mu_);
    if (call_status_.ok()) call_status_ = call_status;
  }
  in_.Clear();
  if (resp.last) {
    absl::Status final_status;
    {
      absl::MutexLock l(&mu_);
      final_status = call_status_;
    }
    EndCall(final_status);
  }
  StartRead(&in_);
}

void ShardStream::EndCall(absl::Status s) {
  DoneHandler done;
  {
    absl::MutexLock l(&mu_);
    if (call_id_ == 0) return;
    call_id_ = 0;
    done = std::move(on_done_);
    on_response_ = nullptr;
  }
  if (done) done(std::move(s));
}

void ShardStream::OnDone(const grpc::Status& status) {
  absl::Status why;
  {
    absl::MutexLock l(&mu_);
    broken_ = true;
    why = call_status_.ok() ? FromGrpcStatus(status) : call_status_;
  }
  if (why.ok()) why = absl::UnavailableError("the server closed the stream");
  EndCall(why);
  absl::MutexLock l(&mu_);
  done_ = true;
}

}  // namespace ps
