// InFlight: the call a Python ps.Client (python/ext/ps_module.cc) runs on
// its caller's thread: which thread, for the interrupt check
// (ClientOptions::interrupt), and whether one runs, for close() from
// another thread. Thread-safe; Interrupted() takes the GIL.
#ifndef PS_PYTHON_EXT_IN_FLIGHT_H_
#define PS_PYTHON_EXT_IN_FLIGHT_H_

#include <pybind11/pybind11.h>

#include <atomic>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ps {

// The call a Client runs on its caller's thread: which thread, for the
// interrupt check, and whether one runs, for close() from another thread.
// Shared with the check, which Connect's thread may hold past the Client.
struct InFlight {
  absl::Mutex mu;
  int calls ABSL_GUARDED_BY(mu) = 0;
  std::atomic<std::thread::id> caller{};  // the thread of the call running

  // Marks this thread's call as running while it lives.
  class Call {
   public:
    explicit Call(InFlight* f) : f_(f) {
      absl::MutexLock l(&f_->mu);
      ++f_->calls;
      f_->caller = std::this_thread::get_id();
    }
    ~Call() {
      absl::MutexLock l(&f_->mu);
      --f_->calls;
      f_->caller = std::thread::id();
    }
    Call(const Call&) = delete;
    Call& operator=(const Call&) = delete;

   private:
    InFlight* const f_;
  };

  // ClientOptions::interrupt: on the thread of the call running (never
  // Connect's), runs the interpreter's signal handlers; true when one
  // raised (Ctrl-C), its exception left set for the caller to raise.
  bool Interrupted() {
    if (std::this_thread::get_id() != caller.load()) return false;
    pybind11::gil_scoped_acquire gil;
    return PyErr_CheckSignals() != 0;
  }
};

}  // namespace ps

#endif  // PS_PYTHON_EXT_IN_FLIGHT_H_
