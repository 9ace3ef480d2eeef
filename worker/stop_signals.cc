#include "worker/stop_signals.h"

#include <fcntl.h>
#include <signal.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <iostream>
#include <thread>

namespace ps {
namespace {

// The write end of the pipe the handler tells the waiting thread through.
// Libraries start threads of their own before main (OpenBLAS' pool), so a
// blocked mask cannot route the signals to one thread: a handler, which
// any thread may run, writes the signal's number, the only thing it may
// safely do.
int g_signal_pipe = -1;

extern "C" void OnStopSignal(int sig) {
  const int saved = errno;
  const unsigned char byte = static_cast<unsigned char>(sig);
  (void)!write(g_signal_pipe, &byte, 1);
  errno = saved;
}

}  // namespace

StopSignals* StopSignals::Install() {
  static StopSignals* const instance = [] {
    int fds[2];
    if (pipe2(fds, O_CLOEXEC) != 0) return static_cast<StopSignals*>(nullptr);
    g_signal_pipe = fds[1];
    auto* s = new StopSignals();
    std::thread([s, in = fds[0]] { s->Wait(in); }).detach();
    struct sigaction sa = {};
    sa.sa_handler = OnStopSignal;
    sigemptyset(&sa.sa_mask);
    sa.sa_flags = SA_RESTART;
    sigaction(SIGINT, &sa, nullptr);
    sigaction(SIGTERM, &sa, nullptr);
    return s;
  }();
  return instance;
}

void StopSignals::Watch(Registration* registration) {
  absl::MutexLock l(&mu_);
  registration_ = registration;
}

void StopSignals::Unwatch() {
  absl::MutexLock l(&mu_);
  registration_ = nullptr;
}

void StopSignals::Wait(int in) {
  unsigned char byte = 0;
  while (read(in, &byte, 1) != 1) {
    if (errno != EINTR) return;  // cannot happen while the write end is open
  }
  const int sig = byte;
  const char* name = sig == SIGINT ? "SIGINT" : "SIGTERM";
  // Held to the end: main cannot destroy the registration meanwhile.
  mu_.Lock();
  if (registration_ != nullptr) {
    registration_->Leave();
    std::cerr << "ps_worker: received " << name << "; left the job (" << registration_->key() << ")"
              << std::endl;
  } else {
    std::cerr << "ps_worker: received " << name << std::endl;
  }
  std::cout.flush();
  std::_Exit(128 + sig);
}

}  // namespace ps
