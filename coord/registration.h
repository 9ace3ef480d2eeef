// Registration: this process's place in its job's membership in etcd
// (docs/elastic.md): the key /ps/<job>/<role>/<id>, whose value says where
// the member is (a server's address, a worker's host and pid), held by an
// etcd lease of `ttl` that a thread of its own renews every ttl / 3.
//
// A process that dies drops out when etcd lets its lease expire (at most
// `ttl` later); one that stops calls Leave() (the destructor does too),
// which revokes the lease, so its key goes at once. If a renewal fails
// (etcd unreachable) the thread logs it once, keeps trying on its schedule
// and logs when etcd answers again; if etcd says the lease has ended (it
// expired meanwhile, or etcd lost its data), the thread registers again
// under a new lease, and logs that.
//
// Join takes a given id and fails ALREADY_EXISTS, naming the holder, when a
// live member holds it; JoinFreeId takes the lowest id no live member
// holds (etcd's transaction decides between processes that race for it).
//
// Thread-safe. Borrows the EtcdClient, which must outlive it.
#ifndef PS_COORD_REGISTRATION_H_
#define PS_COORD_REGISTRATION_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"

namespace ps {

struct RegistrationOptions {
  std::string job = "default";  // the keys' prefix: /ps/<job>/
  // How long a member that stopped answering stays listed. etcd's minimum
  // is about 1.5 s.
  absl::Duration ttl = absl::Seconds(10);
  // Where the renewal thread's lines go (null: nowhere).
  std::function<void(const std::string&)> log;
  // Called on the renewal thread after each registration again (the lease
  // had ended: etcd may have lost its data), e.g. to write again what the
  // member keeps in etcd besides its key. Null: nothing.
  std::function<void()> on_registered_again;

  // INVALID_ARGUMENT for an empty job or one with '/', or a ttl under 2 s.
  absl::Status Validate() const;
};

// The key of member `id` of `role` ("servers" or "workers") in `job`, and
// the prefix of all of a role's keys.
std::string MemberKey(const std::string& job, const std::string& role, int id);
std::string RolePrefix(const std::string& job, const std::string& role);
// The prefix of every key of `job`: "/ps/<job>/".
std::string JobPrefix(const std::string& job);

// The id of a member's `key` under `prefix` (RolePrefix); false for a key
// that names none.
bool MemberIdOfKey(const std::string& key, const std::string& prefix, int* id);

struct Member {
  std::string role;
  int id = 0;
  std::string value;
};
// The live members of `job`, servers then workers, each by id.
absl::StatusOr<std::vector<Member>> ListMembers(EtcdClient* etcd, const std::string& job);

class Registration;

// A worker's registration, its value this process's "HOST pid PID": id >= 0
// takes that id (Registration::Join), -1 the lowest free one below
// `num_workers` (Registration::JoinFreeId). With `joining`, the value ends
// in kJoiningSuffix until MarkWorkerReady: the id is held, but sync servers
// do not wait for the worker yet (it is loading its data).
absl::StatusOr<std::unique_ptr<Registration>> JoinAsWorker(EtcdClient* etcd, int id,
                                                           int num_workers,
                                                           const RegistrationOptions& options,
                                                           bool joining = false);
inline constexpr char kJoiningSuffix[] = " joining";
// A worker that loaded its data and waits for an epoch to take a share of
// (coord/elastic_shares.h): its value ends in kWaitingSuffix.
inline constexpr char kWaitingSuffix[] = " waiting";
// Drops the suffix: the servers wait for the worker from now on.
absl::Status MarkWorkerReady(Registration* registration);
// Sets the value to "HOST pid PID waiting".
absl::Status MarkWorkerWaiting(Registration* registration);
// Whether a worker's key of `value` is ready (no suffix): sync servers
// wait for it, and its requests bring it back after a drop.
bool WorkerReady(const std::string& value);
// Whether it has loaded its data (ready or waiting): a new epoch lists it.
bool WorkerLoaded(const std::string& value);

class Registration {
 public:
  static absl::StatusOr<std::unique_ptr<Registration>> Join(EtcdClient* etcd,
                                                            const std::string& role, int id,
                                                            const std::string& value,
                                                            const RegistrationOptions& options);
  // The lowest free id in [0, limit); RESOURCE_EXHAUSTED when all are held.
  static absl::StatusOr<std::unique_ptr<Registration>> JoinFreeId(
      EtcdClient* etcd, const std::string& role, int limit, const std::string& value,
      const RegistrationOptions& options);
  ~Registration();  // Leave()

  Registration(const Registration&) = delete;
  Registration& operator=(const Registration&) = delete;

  int id() const { return id_; }
  const std::string& key() const { return key_; }

  // Whether the last renewal reached etcd (true until one fails).
  bool renewing() const;

  // Replaces the key's value (under the same lease), for a registration
  // again after a lost lease too. The error of the put, if any.
  absl::Status SetValue(const std::string& value);

  // Revokes the lease (the key goes at once) and stops renewing it.
  // Idempotent; errors are logged (the lease then expires on its own).
  void Leave();

 private:
  Registration(EtcdClient* etcd, std::string role, int id, std::string value, int64_t lease,
               const RegistrationOptions& options);
  void Renew();  // the thread
  void Log(const std::string& line) const;

  EtcdClient* const etcd_;
  const std::string role_;
  const int id_;
  const std::string key_;
  const RegistrationOptions options_;

  mutable absl::Mutex mu_;
  std::string value_ ABSL_GUARDED_BY(mu_);
  int64_t lease_ ABSL_GUARDED_BY(mu_);
  bool renewing_ ABSL_GUARDED_BY(mu_) = true;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;  // last: started once the rest is set
};

}  // namespace ps

#endif  // PS_COORD_REGISTRATION_H_
