// WaitForKeys: waits until the keys under a prefix in etcd meet a
// condition, or a deadline passes. ps_worker waits so for the records and
// keys of a job's epochs (coord/elastic_shares.h).
//
// It lists the keys and, unless `done` holds for them, watches the prefix
// from the listing's revision on, applying each change to its copy and
// asking `done` again after each batch of changes: no change between the
// listing and the watch is missed, and nothing polls.
//
// Blocks the calling thread (a second thread ends the watch at the
// deadline). Thread-safe as EtcdClient is; borrows it for the call.
#ifndef PS_COORD_KEY_WAIT_H_
#define PS_COORD_KEY_WAIT_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"

namespace ps {

// The keys under a prefix and their values.
using KeyMap = std::map<std::string, std::string>;

// True once `done(keys)` holds, false when `deadline` passes first.
// Errors: etcd's (UNAVAILABLE when it is down or the watch breaks).
absl::StatusOr<bool> WaitForKeys(EtcdClient* etcd, const std::string& prefix,
                                 const std::function<bool(const KeyMap&)>& done,
                                 absl::Time deadline);

}  // namespace ps

#endif  // PS_COORD_KEY_WAIT_H_
