// WaitForKeys: waits until the keys under a prefix in etcd meet a
// condition, a deadline passes, or the caller's interrupt check fails.
// ps_worker and the Python package wait so for the records and keys of a
// job's epochs (coord/elastic_shares.h).
//
// It lists the keys and, unless `done` holds for them, watches the prefix
// from the listing's revision on, applying each change to its copy and
// asking `done` again after each batch of changes: no change between the
// listing and the watch is missed, and nothing polls etcd.
//
// Blocks the calling thread; the watch runs on a second thread, which
// calls `done`. The calling thread asks `interrupted` every `poll` while
// it waits: a check that must run there (the Python package's, which runs
// the interpreter's signal handlers) ends the wait within `poll`.
// Thread-safe as EtcdClient is; borrows it for the call.
#ifndef PS_COORD_KEY_WAIT_H_
#define PS_COORD_KEY_WAIT_H_

#include <functional>
#include <map>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"

namespace ps {

// The keys under a prefix and their values.
using KeyMap = std::map<std::string, std::string>;

// What may end a wait early: `interrupted` (null: nothing), asked on the
// calling thread every `poll`; its error ends the wait with that error.
struct KeyWaitInterrupt {
  std::function<absl::Status()> interrupted;
  absl::Duration poll = absl::Milliseconds(100);
};

// True once `done(keys)` holds, false when `deadline` passes first.
// Errors: etcd's (UNAVAILABLE when it is down or the watch breaks), or the
// interrupt's.
absl::StatusOr<bool> WaitForKeys(EtcdClient* etcd, const std::string& prefix,
                                 const std::function<bool(const KeyMap&)>& done,
                                 absl::Time deadline, const KeyWaitInterrupt& interrupt = {});

}  // namespace ps

#endif  // PS_COORD_KEY_WAIT_H_
