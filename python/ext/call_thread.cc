#include "python/ext/call_thread.h"

#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {

struct CallThread::State {
  absl::Mutex mu;
  std::function<absl::Status()> call ABSL_GUARDED_BY(mu);  // to run; null once started
  bool running ABSL_GUARDED_BY(mu) = false;                // started, not finished
  bool finished ABSL_GUARDED_BY(mu) = false;               // finished, status not taken
  absl::Status status ABSL_GUARDED_BY(mu);
  bool stop ABSL_GUARDED_BY(mu) = false;

  // The thread's loop: runs each call handed over, until stopped.
  void Loop() {
    absl::MutexLock l(&mu);
    while (true) {
      auto ready = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu) { return call != nullptr || stop; };
      mu.Await(absl::Condition(&ready));  // idle: no deadline to keep
      if (call == nullptr) return;        // stopped
      std::function<absl::Status()> run = std::move(call);
      call = nullptr;
      mu.Unlock();
      absl::Status s = run();
      run = nullptr;  // what it captured goes here, on this thread
      mu.Lock();
      status = std::move(s);
      running = false;
      finished = true;
    }
  }
};

CallThread::CallThread()
    : state_(std::make_shared<State>()), thread_([state = state_] { state->Loop(); }) {}

CallThread::~CallThread() {
  bool running;
  {
    absl::MutexLock l(&state_->mu);
    state_->stop = true;
    running = state_->running;
  }
  if (running) {
    thread_.detach();  // it ends after the call, holding its own reference to the state
  } else {
    thread_.join();
  }
}

void CallThread::Start(std::function<absl::Status()> call) {
  absl::MutexLock l(&state_->mu);
  state_->call = std::move(call);
  state_->running = true;
}

bool CallThread::Wait(absl::Duration timeout) {
  State& s = *state_;
  absl::MutexLock l(&s.mu);
  auto done = [&s]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(s.mu) { return !s.running; };
  return s.mu.AwaitWithTimeout(absl::Condition(&done), timeout);
}

absl::Status CallThread::Take() {
  absl::MutexLock l(&state_->mu);
  state_->finished = false;
  return std::move(state_->status);
}

bool CallThread::idle() {
  absl::MutexLock l(&state_->mu);
  return !state_->running && !state_->finished;
}

}  // namespace ps
