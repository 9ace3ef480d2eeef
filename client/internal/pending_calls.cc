#include "client/internal/pending_calls.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"

namespace ps {

PendingCalls::PendingCalls(const std::vector<std::string>& servers, absl::Time deadline,
                           const char* why, CallCanceller* canceller)
    : deadline_(deadline), deadline_why_(why), canceller_(canceller) {
  {
    absl::MutexLock l(&mu_);
    for (size_t s = 0; s < servers.size(); ++s) unanswered_[static_cast<int>(s)] = servers[s];
  }
  registration_ = std::make_unique<CallCanceller::Registration>(canceller, [this] {
    absl::MutexLock l(&mu_);
    cancelled_ = true;
    CancelUnanswered();
  });
}

PendingCalls::~PendingCalls() {
  registration_.reset();  // waits for a cancel in progress
  absl::MutexLock l(&mu_);
  if (!unanswered_.empty()) {
    CancelUnanswered();
    // Cancelled calls complete promptly; their callbacks reference this object.
    mu_.Await(absl::Condition(
        +[](std::map<int, std::string>* m) { return m->empty(); }, &unanswered_));
  }
}

std::unique_ptr<PendingCalls> PendingCalls::Failed(absl::Status s) {
  std::unique_ptr<PendingCalls> op(new PendingCalls());
  absl::MutexLock l(&op->mu_);
  op->status_ = std::move(s);
  return op;
}

void PendingCalls::AddCancel(std::function<void()> cancel) {
  absl::MutexLock l(&mu_);
  cancels_.push_back(std::move(cancel));
  if (cancelled_ && !unanswered_.empty()) cancels_.back()();
}

void PendingCalls::CancelUnanswered() {
  if (unanswered_.empty()) return;  // the streams may be gone: nothing to cancel
  for (auto& cancel : cancels_) cancel();
}

PendingCalls::UnaryCall* PendingCalls::AddUnaryCall() {
  calls_.push_back(std::make_unique<UnaryCall>());
  UnaryCall* call = calls_.back().get();
  AddCancel([call] { call->ctx.TryCancel(); });
  return call;
}

void PendingCalls::Done(int shard, absl::Status s) {
  absl::MutexLock l(&mu_);
  auto it = unanswered_.find(shard);
  if (it == unanswered_.end()) return;  // our bug; never twice per shard
  if (!s.ok() && status_.ok()) {
    status_ = absl::Status(s.code(), absl::StrCat("shard ", shard, " (", it->second, "): ",
                                                  s.message()));
  }
  unanswered_.erase(it);
}

absl::Status PendingCalls::Wait() {
  absl::MutexLock l(&mu_);
  auto all_done = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return unanswered_.empty(); };
  auto done_or_failed = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return unanswered_.empty() || !status_.ok();
  };
  bool done = false;
  bool interrupted = false;  // once cancelled, the calls' ends are only waited for
  while (true) {
    const absl::Duration every = canceller_ != nullptr && !interrupted
                                     ? canceller_->interrupt_every()
                                     : absl::InfiniteDuration();
    const absl::Time until = std::min(deadline_, absl::Now() + every);
    done = mu_.AwaitWithDeadline(absl::Condition(&done_or_failed), until);
    if (done || until >= deadline_) break;
    // The check may take other locks (the interpreter's); its cancel takes ours.
    mu_.Unlock();
    interrupted = canceller_->PollInterrupt();
    mu_.Lock();
  }
  if (done && !status_.ok() && !unanswered_.empty()) {
    // One shard failed: the operation has, so the others' calls are ended
    // now rather than waited for. (A sync pull may wait on workers that in
    // turn wait for this one to retry the failed shard.)
    CancelUnanswered();
    mu_.Await(absl::Condition(&all_done));
  }
  if (!unanswered_.empty()) {
    // Unary calls carry their own deadline, so this matters for stream calls.
    if (status_.ok()) {
      std::vector<std::string> silent;
      for (const auto& [s, address] : unanswered_) {
        silent.push_back(absl::StrCat("shard ", s, " (", address, ")"));
      }
      status_ = absl::DeadlineExceededError(absl::StrCat(
          "no answer from ", absl::StrJoin(silent, ", "), " within ",
          absl::StrFormat("%.0f s", absl::ToDoubleSeconds(deadline_ - started_)),
          " (", deadline_why_, "): the server or the network to it may be down"));
    }
    CancelUnanswered();
    mu_.Await(absl::Condition(&all_done));
  }
  return status_;
}

}  // namespace ps
