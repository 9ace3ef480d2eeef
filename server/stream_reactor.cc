#include "server/stream_reactor.h"

#include <deque>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "grpcpp/alarm.h"
#include "rpc/raw_wire.h"
#include "rpc/wire.h"
#include "server/core/pipeline.h"
#include "server/replies.h"

namespace ps {
namespace {

// Ids a piece of a rows answer holds (dim 16: 512 KB), sent while the next
// is read.
constexpr size_t kRowsPieceIds = 8192;

class StreamReactor;

// What the reactor shares with the shard's callbacks and the call alarm,
// which may outlive it: the write queue, the stream's lifecycle and the wait
// of the open call.
// `reactor` is null once gRPC is done with the stream; later writes are
// dropped.
struct Core {
  explicit Core(Shard* shard) : wait(shard) {}

  CallWait wait;  // the shard wait of the open call
  absl::Mutex mu;
  StreamReactor* reactor ABSL_GUARDED_BY(mu) = nullptr;
  std::deque<grpc::ByteBuffer> queue ABSL_GUARDED_BY(mu);
  bool writing ABSL_GUARDED_BY(mu) = false;     // a StartWrite is in flight
  bool reads_done ABSL_GUARDED_BY(mu) = false;  // no more requests will come
  bool finished ABSL_GUARDED_BY(mu) = false;    // Finish was called
  bool broken ABSL_GUARDED_BY(mu) = false;      // failed, cancelled or a write failed
  absl::Status final_status ABSL_GUARDED_BY(mu);
  bool call_open ABSL_GUARDED_BY(mu) = false;  // a call is started and not yet answered
  // Fires call_timeout after a call's first message unless its last came.
  std::unique_ptr<grpc::Alarm> alarm ABSL_GUARDED_BY(mu);
  uint64_t receiving ABSL_GUARDED_BY(mu) = 0;  // id of the call still being received

  // Queues a call's responses; `closes_call` when they are its last.
  void Send(std::vector<grpc::ByteBuffer> messages, bool closes_call);
  void WriteDone(bool ok);
  // No more reads; a non-OK status ends the stream with it.
  void ReadsDone(absl::Status status);
  // Ends the stream with `status` (once the write in flight, if any, is done).
  void Fail(absl::Status status);
  // The alarm of call `id` fired.
  void CallTimedOut(uint64_t id, absl::Duration timeout);
  bool finished_or_broken() {
    absl::MutexLock l(&mu);
    return finished || broken;
  }

  // What to do once the lock is released: gRPC reactor operations are not
  // started under `mu`. Neither can race with OnDone: the stream is not
  // finished while a write is in flight, and nothing touches it after Finish.
  struct Actions {
    StreamReactor* reactor = nullptr;
    const grpc::ByteBuffer* write = nullptr;
    bool finish = false;
    grpc::Status status;
  };
  Actions NextLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu);
  static void Run(const Actions& a);
};

class StreamReactor final : public grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer> {
 public:
  StreamReactor(Shard* shard, absl::Duration call_timeout,
                std::function<absl::Status(int)> may_act_as, RpcMetrics* metrics)
      : shard_(shard),
        call_timeout_(call_timeout),
        may_act_as_(std::move(may_act_as)),
        record_(metrics, RpcMetrics::kStream),
        core_(std::make_shared<Core>(shard)) {
    {
      absl::MutexLock l(&core_->mu);
      core_->reactor = this;
    }
    StartRead(&in_);
  }

  void OnReadDone(bool ok) override {
    absl::Status s;
    try {
      s = ok ? Handle() : ClientClosed();
    } catch (...) {
      s = StatusFromCurrentException(absl::StrCat("stream to shard ", shard_->options().shard_id));
    }
    in_.Clear();
    if (!ok || !s.ok()) {
      // The stream is over: the client closed it, or it is unusable
      // (malformed framing, call protocol, out of memory).
      call_ = Call();  // frees the gradient buffer
      StopAlarm();
      core_->ReadsDone(s);
      return;
    }
    if (!core_->finished_or_broken()) StartRead(&in_);
  }

  void OnWriteDone(bool ok) override { core_->WriteDone(ok); }

  void OnCancel() override {
    Core::Actions a;
    {
      absl::MutexLock l(&core_->mu);
      core_->broken = true;
      a = core_->NextLocked();
    }
    Core::Run(a);
    core_->wait.Cancel();
  }

  void OnDone() override {
    StopAlarm();
    {
      absl::MutexLock l(&core_->mu);
      core_->reactor = nullptr;
    }
    // A stream that ended with a pull still waiting (it failed, or the client
    // left): drop the wait; its answer would go nowhere.
    core_->wait.Cancel();
    delete this;
  }

  // For Core::Run.
  void Write(const grpc::ByteBuffer* b) { StartWrite(b); }
  void Done(const grpc::Status& s) {
    record_.Finished(s.error_code());  // before the client can see the status
    Finish(s);
  }

 private:
  // The call being received.
  struct Call {
    bool open = false;
    StreamCallHeader header;
    std::optional<ShardCall> call;  // once the header came
  };

  absl::Status Handle();
  absl::Status ClientClosed();
  void Complete();
  // Runs a rows call (one message) on the shard and answers it at once.
  void AnswerRows(const RawStreamRequest& req);
  void StartAlarm(uint64_t id);
  void StopAlarm();

  Shard* const shard_;
  const absl::Duration call_timeout_;
  const std::function<absl::Status(int)> may_act_as_;  // null: anyone may
  // Recorded by Done; if the stream ends without a status (the client
  // cancelled or left), as CANCELLED when OnDone deletes the reactor.
  CallRecord record_;
  const std::shared_ptr<Core> core_;
  grpc::ByteBuffer in_;  // the message being read
  Call call_;            // only touched by the read path, which gRPC serializes
};

Core::Actions Core::NextLocked() {
  Actions a;
  if (reactor == nullptr || finished) return a;
  a.reactor = reactor;
  if (!writing && !queue.empty() && !broken) {
    writing = true;
    a.write = &queue.front();
    return a;
  }
  if (!writing && (broken || (reads_done && !call_open && queue.empty()))) {
    finished = true;
    a.finish = true;
    a.status = broken && final_status.ok() ? grpc::Status::CANCELLED : ToGrpcStatus(final_status);
  }
  return a;
}

void Core::Run(const Actions& a) {
  if (a.write != nullptr) a.reactor->Write(a.write);
  if (a.finish) a.reactor->Done(a.status);
}

void Core::Send(std::vector<grpc::ByteBuffer> messages, bool closes_call) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    if (closes_call) {
      call_open = false;
      wait.Finished();
    }
    if (finished) return;
    for (grpc::ByteBuffer& m : messages) queue.push_back(std::move(m));
    a = NextLocked();
  }
  Run(a);
}

void Core::WriteDone(bool ok) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    writing = false;
    queue.pop_front();
    if (!ok) broken = true;
    a = NextLocked();
  }
  Run(a);
}

void Core::ReadsDone(absl::Status status) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    reads_done = true;
    if (!status.ok()) {
      if (final_status.ok()) final_status = status;
      broken = true;
    }
    a = NextLocked();
  }
  Run(a);
}

void Core::Fail(absl::Status status) {
  Actions a;
  {
    absl::MutexLock l(&mu);
    if (final_status.ok()) final_status = std::move(status);
    broken = true;
    a = NextLocked();
  }
  Run(a);
}

void Core::CallTimedOut(uint64_t id, absl::Duration timeout) {
  {
    absl::MutexLock l(&mu);
    if (receiving != id) return;  // it arrived in full meanwhile
  }
  // Finishing with a read outstanding is allowed: the read then fails, and
  // the read path frees the call.
  Fail(absl::DeadlineExceededError(
      absl::StrCat("stream call ", id, " did not arrive in full within ",
                   absl::FormatDuration(timeout), " (--call_timeout); the stream is closed")));
}

void StreamReactor::StartAlarm(uint64_t id) {
  if (call_timeout_ <= absl::ZeroDuration()) return;
  auto alarm = std::make_unique<grpc::Alarm>();
  std::shared_ptr<Core> core = core_;
  const absl::Duration timeout = call_timeout_;
  grpc::Alarm* a = alarm.get();
  {
    absl::MutexLock l(&core_->mu);
    core_->receiving = id;
    core_->alarm = std::move(alarm);
  }
  // The alarm is owned by the core, which the callback keeps alive.
  a->Set(absl::ToChronoTime(absl::Now() + timeout), [core, id, timeout](bool fired) {
    if (fired) core->CallTimedOut(id, timeout);
  });
}

void StreamReactor::StopAlarm() {
  std::unique_ptr<grpc::Alarm> alarm;
  {
    absl::MutexLock l(&core_->mu);
    core_->receiving = 0;
    alarm = std::move(core_->alarm);
  }
  if (alarm != nullptr) alarm->Cancel();  // outside the lock: may run the callback
}

absl::Status StreamReactor::ClientClosed() {
  if (!call_.open) return absl::OkStatus();
  return absl::InvalidArgumentError(
      absl::StrCat("the client closed its stream in the middle of call ", call_.header.call_id,
                   " (its last message never came)"));
}

absl::Status StreamReactor::Handle() {
  ReceivedBytes bytes;
  RawStreamRequest req;
  RETURN_IF_ERROR(ps::Receive(in_, &bytes));
  RETURN_IF_ERROR(DecodeStreamRequest(bytes.pieces, &req));
  if (!call_.open) {
    // A new call.
    if (req.header.call_id == 0) {
      return absl::InvalidArgumentError("stream call_id must be > 0");
    }
    if (may_act_as_) RETURN_IF_ERROR(may_act_as_(req.header.worker_id));
    {
      absl::MutexLock l(&core_->mu);
      if (core_->call_open) {
        return absl::InvalidArgumentError(absl::StrCat(
            "stream call ", req.header.call_id,
            " started before the previous call was answered; a stream runs one call at a time"));
      }
      core_->call_open = true;
    }
    if (IsRowsCall(req.header.kind)) {
      if (!req.last) {
        return absl::InvalidArgumentError(
            absl::StrCat("stream rows call ", req.header.call_id,
                         " must be one message (with `last` set); a rows call is never chunked"));
      }
      AnswerRows(req);
      return absl::OkStatus();
    }
    call_ = Call();
    call_.open = true;
    call_.header = req.header;
    const StreamCallHeader& h = req.header;
    std::optional<PushArgs> push;
    std::optional<PullArgs> pull;
    if (h.kind != StreamCall::kPull) push = PushArgs{h.worker_id, h.version, h.seq};
    if (h.kind != StreamCall::kPush) {
      pull = PullArgs{h.worker_id, h.min_version, absl::Milliseconds(h.wait_timeout_ms),
                      /*renews_lease=*/true, h.weights_dtype};
    }
    call_.call.emplace(shard_, push, pull);
    if (!req.last) StartAlarm(req.header.call_id);
  } else if (req.header.call_id != call_.header.call_id) {
    return absl::InvalidArgumentError(absl::StrCat("stream message for call ", req.header.call_id,
                                                   " while call ", call_.header.call_id,
                                                   " is incomplete"));
  }
  for (const RawTensorSlice& chunk : req.gradients) call_.call->AddChunk(chunk);
  if (req.last) {
    StopAlarm();
    Complete();
  }
  return absl::OkStatus();
}

void StreamReactor::AnswerRows(const RawStreamRequest& req) {
  const StreamCallHeader& h = req.header;
  if (h.kind == StreamCall::kPullRows && h.prefetch) {  // answered at once, without rows
    const absl::Status s = shard_->PrefetchRows(h.worker_id, h.table, req.ids);
    core_->Send({EncodeStreamDone(h.call_id, 0, s, ReplyInfo{shard_->incarnation()})},
                /*closes_call=*/true);
    return;
  }
  if (h.kind == StreamCall::kPullRows || h.kind == StreamCall::kPushPullRows) {
    // The rows go out piece by piece as the shard reads them, so the first
    // are on the wire while the rest are looked up; a sync push-pull's come
    // whole when its step closes (Shard::PushPullRows), perhaps on another
    // thread, so what the answer needs is kept in `sent`.
    struct Sent {
      bool any = false, closed = false;
    };
    auto sent = std::make_shared<Sent>();
    const Incarnation incarnation = shard_->incarnation();
    const uint64_t id = h.call_id;
    std::shared_ptr<Core> core = core_;
    const auto piece = [core, sent, id, incarnation](RowsResult rows, PushOutcome outcome,
                                                     bool last) {
      auto values = std::make_shared<const std::vector<float>>(std::move(rows.values));
      core->Send(EncodeStreamRows(id, rows.version, std::move(values),
                                  ReplyInfo{incarnation, outcome}, kStreamChunkBytes,
                                  /*first=*/!sent->any, last),
                 /*closes_call=*/last);
      sent->any = true;
      sent->closed = last;
    };
    // The end of a call whose rows did not go out in pieces: its rows, or
    // its error.
    const auto finish = [core, sent, id, piece](absl::Status s,
                                                std::optional<RowsPushPullResult> r) {
      try {
        if (sent->closed) return;
        if (s.ok() && r.has_value()) {
          piece(std::move(r->rows), r->outcome, /*last=*/true);
          return;
        }
        core->Send(
            {EncodeStreamDone(
                id, 0, s.ok() ? absl::InternalError("rows call ended without its rows") : s)},
            /*closes_call=*/true);
      } catch (...) {
        core->Fail(StatusFromCurrentException("stream rows answer"));
      }
    };
    const auto finish_rows = [finish](absl::StatusOr<RowsResult> r) {
      if (!r.ok()) return finish(r.status(), std::nullopt);
      finish(absl::OkStatus(), RowsPushPullResult{*std::move(r), PushOutcome::kApplied});
    };
    if (h.kind == StreamCall::kPullRows && h.min_version > 0) {  // waits for the version
      core_->wait.Started(shard_->PullRowsAt(h.worker_id, h.table, req.ids, h.min_version,
                                             absl::Milliseconds(h.wait_timeout_ms),
                                             [core, finish_rows](absl::StatusOr<RowsResult> r) {
                                               core->wait.Finished();
                                               finish_rows(std::move(r));
                                             }));
      return;
    }
    if (h.kind == StreamCall::kPullRows) {
      finish(
          shard_
              ->PullRows(h.worker_id, h.table, req.ids, /*renews_lease=*/true, kRowsPieceIds, piece)
              .status(),
          std::nullopt);
      return;
    }
    absl::StatusOr<RowGradientFloats> grads = RowGradients(h.table, req.row_grads);
    if (!grads.ok()) {
      finish(grads.status(), std::nullopt);
      return;
    }
    core_->wait.Started(shard_->PushPullRows(
        h.worker_id, h.table, h.version, h.seq, req.ids, grads->floats(),
        absl::Milliseconds(h.wait_timeout_ms),
        [core, finish](absl::StatusOr<RowsPushPullResult> r) {
          core->wait.Finished();
          if (!r.ok()) return finish(r.status(), std::nullopt);
          finish(absl::OkStatus(), *std::move(r));
        },
        kRowsPieceIds, piece));
    return;
  }
  absl::StatusOr<RowGradientFloats> grads = RowGradients(h.table, req.row_grads);
  absl::StatusOr<PushResult> pushed = grads.ok() ? shard_->PushRows(h.worker_id, h.table, h.version,
                                                                    h.seq, req.ids, grads->floats())
                                                 : absl::StatusOr<PushResult>(grads.status());
  core_->Send(EncodeStreamRowPushReply(h.call_id, pushed, shard_->incarnation()),
              /*closes_call=*/true);
}

void StreamReactor::Complete() {
  Call call = std::move(call_);
  call_ = Call();
  const uint64_t id = call.header.call_id;
  const WireDtype weights_dtype = call.header.weights_dtype;
  const int shard_id = shard_->options().shard_id;
  std::shared_ptr<Core> core = core_;
  std::move(*call.call)
      .Complete(
          &core_->wait, [core, id, shard_id, weights_dtype](absl::StatusOr<CallResult> result) {
            try {
              core->Send(EncodeStreamReply(id, result, weights_dtype), /*closes_call=*/true);
            } catch (...) {
              core->Fail(StatusFromCurrentException(absl::StrCat("stream to shard ", shard_id)));
            }
          });
}

}  // namespace

grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* NewStreamReactor(
    Shard* shard, absl::Duration call_timeout, std::function<absl::Status(int)> may_act_as,
    RpcMetrics* metrics) {
  return new StreamReactor(shard, call_timeout, std::move(may_act_as), metrics);
}

}  // namespace ps
