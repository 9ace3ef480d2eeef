// MemberWatch: the ids of one role's live members of a job in etcd
// (coord/registration.h's keys, /ps/<job>/<role>/<id>), reported to its
// owner every time the set changes. ps_server watches the workers this way:
// in sync and SSP mode with a coordinator, its steps wait for the workers
// in this set (server/core/membership.h, docs/elastic.md).
//
// It runs on a PrefixWatch (coord/prefix_watch.h): a thread of its own
// lists the keys and then watches them, so that no change is missed. When
// the watch breaks (etcd down, restarted, or unreachable), the owner keeps
// the last set: the thread logs it once, tries again every `retry`, and
// when etcd answers lists the keys again and reports that set (a member
// that left meanwhile is reported gone then). If etcd came back without
// its data, the listing waits one `ttl` first, while the members register
// again: a restart of etcd does not drop every worker.
//
// Thread-safe. Borrows the EtcdClient, which must outlive it. The callback
// runs on the watch's thread, one call at a time; it must not destroy the
// watch.
#ifndef PS_COORD_MEMBER_WATCH_H_
#define PS_COORD_MEMBER_WATCH_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/time/time.h"
#include "coord/etcd_client.h"
#include "coord/prefix_watch.h"

namespace ps {

struct MemberWatchOptions {
  std::string job = "default";
  std::string role = "workers";
  // The members' lease ttl (--coordinator_ttl): how long the listing waits
  // after etcd came back without its data.
  absl::Duration ttl = absl::Seconds(10);
  // How often a broken watch is tried again.
  absl::Duration retry = absl::Seconds(1);
  // Where the thread's lines go (null: nowhere).
  std::function<void(const std::string&)> log;
  // Which keys count, by value (null: all): the servers leave out workers
  // still loading their data or waiting for an epoch (registration.h's
  // WorkerCounts).
  std::function<bool(const std::string& value)> counts;
};

// One report: the ids of the members whose keys count, and of those whose
// keys do not (held: the id is taken), each ascending.
struct WatchedMembers {
  std::vector<int> counted;
  std::vector<int> held;
};

class MemberWatch {
 public:
  // Starts the thread; `on_change` gets the members after the first
  // listing and after every change.
  static std::unique_ptr<MemberWatch> Start(EtcdClient* etcd, const MemberWatchOptions& options,
                                            std::function<void(const WatchedMembers&)> on_change);
  ~MemberWatch();  // Stop()

  MemberWatch(const MemberWatch&) = delete;
  MemberWatch& operator=(const MemberWatch&) = delete;

  // Ends the watch and joins the thread. Idempotent.
  void Stop();

  // Whether the watch runs (false from a failure until etcd answers again:
  // the set reported last may be stale meanwhile).
  bool watching() const;

 private:
  MemberWatch() = default;

  // Last: stopped first, while the rest is still there.
  std::unique_ptr<PrefixWatch> watch_;
};

}  // namespace ps

#endif  // PS_COORD_MEMBER_WATCH_H_
