#include "coord/key_wait.h"

#include <algorithm>
#include <cstdint>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "absl/time/clock.h"
#include "common/status_macros.h"

namespace ps {

absl::StatusOr<bool> WaitForKeys(EtcdClient* etcd, const std::string& prefix,
                                 const std::function<bool(const KeyMap&)>& done,
                                 absl::Time deadline, const KeyWaitInterrupt& interrupt) {
  int64_t revision = 0;
  ASSIGN_OR_RETURN(const std::vector<EtcdClient::KeyValue> listed, etcd->List(prefix, &revision));
  KeyMap keys;
  for (const EtcdClient::KeyValue& kv : listed) keys[kv.key] = kv.value;
  if (done(keys)) return true;
  if (absl::Now() >= deadline) return false;
  EtcdClient::WatchCanceller cancel;
  absl::Notification finished;
  bool met = false;
  absl::Status watched;
  std::thread watcher([&] {
    watched = etcd->Watch(prefix, revision + 1, &cancel,
                          [&](const std::vector<EtcdClient::WatchEvent>& events) {
                            for (const EtcdClient::WatchEvent& e : events) {
                              if (e.put) {
                                keys[e.kv.key] = e.kv.value;
                              } else {
                                keys.erase(e.kv.key);
                              }
                            }
                            if (!met && done(keys)) {
                              met = true;
                              cancel.Cancel();
                            }
                          });
    finished.Notify();
  });
  absl::Status stopped;  // the interrupt's error, if it ended the wait
  const absl::Duration poll = std::max(interrupt.poll, absl::Milliseconds(1));
  while (!finished.WaitForNotificationWithDeadline(
      interrupt.interrupted ? std::min(deadline, absl::Now() + poll) : deadline)) {
    if (absl::Now() >= deadline) break;
    stopped = interrupt.interrupted();
    if (!stopped.ok()) break;
  }
  cancel.Cancel();  // a no-op once the watch ended
  watcher.join();
  RETURN_IF_ERROR(stopped);
  if (met) return true;
  RETURN_IF_ERROR(watched);
  return false;
}

}  // namespace ps
