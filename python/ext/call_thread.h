// CallThread: the thread on which a Python ps.Client connects
// (python/ext/ps_module.cc), so that the interpreter's main thread stays
// free to notice Ctrl-C while Connect waits (its other calls run on the
// caller's thread and poll for signals through ClientOptions::interrupt). One persistent thread per
// client, one call at a time: Start() hands it a call, Wait() waits for the
// call to finish, up to a timeout, and Take() collects its status, which
// makes the thread idle again.
//
// Thread safety: Start, Wait, Take and the destructor from the owner (the
// module calls them with the GIL held, or from the one thread that
// released it); the call runs on the thread. The destructor stops the
// thread: it joins it when no call is running, and detaches it when one
// is, so that destroying a CallThread never waits. A detached call runs to
// its end on its own; what it uses must outlive it (the owner leaks it).
#ifndef PS_PYTHON_EXT_CALL_THREAD_H_
#define PS_PYTHON_EXT_CALL_THREAD_H_

#include <functional>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "absl/time/time.h"

namespace ps {

class CallThread {
 public:
  CallThread();
  ~CallThread();
  CallThread(const CallThread&) = delete;
  CallThread& operator=(const CallThread&) = delete;

  // Runs `call` on the thread. REQUIRES: idle() (no call, or its status taken).
  void Start(std::function<absl::Status()> call);

  // Waits up to `timeout` for the call started last; true once it finished
  // (at once when idle).
  bool Wait(absl::Duration timeout);

  // The finished call's status; the thread is idle again. REQUIRES: Wait()
  // returned true.
  absl::Status Take();

  // No call started, or its status taken.
  bool idle();

 private:
  struct State;                   // shared with the thread
  std::shared_ptr<State> state_;  // never null
  std::thread thread_;
};

}  // namespace ps

#endif  // PS_PYTHON_EXT_CALL_THREAD_H_
