#include "coord/key_wait.h"

#include <cstdint>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"
#include "common/status_macros.h"

namespace ps {

absl::StatusOr<bool> WaitForKeys(EtcdClient* etcd, const std::string& prefix,
                                 const std::function<bool(const KeyMap&)>& done,
                                 absl::Time deadline) {
  int64_t revision = 0;
  ASSIGN_OR_RETURN(const std::vector<EtcdClient::KeyValue> listed, etcd->List(prefix, &revision));
  KeyMap keys;
  for (const EtcdClient::KeyValue& kv : listed) keys[kv.key] = kv.value;
  if (done(keys)) return true;
  if (absl::Now() >= deadline) return false;
  EtcdClient::WatchCanceller cancel;
  absl::Notification finished;
  std::thread timer([&] {
    if (!finished.WaitForNotificationWithDeadline(deadline)) cancel.Cancel();
  });
  bool met = false;
  const absl::Status watched = etcd->Watch(prefix, revision + 1, &cancel,
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
  timer.join();
  if (met) return true;
  RETURN_IF_ERROR(watched);
  return false;
}

}  // namespace ps
