// EtcdClient: the calls this project makes to etcd, the coordinator of
// elastic clusters (Debian's etcd-server 3.4), over etcd's v3 gRPC API
// (etcdserverpb, built from Debian's .proto files by third_party/etcd.bzl):
// keys with leases, a put-if-absent transaction, listing by prefix, a
// watch on a prefix, and lease grant, keep-alive and revoke. Nothing of etcd's semantics is
// re-implemented here: a lease that etcd lets expire takes its keys with it.
//
// The endpoints of a CoordinatorAddress are tried in order: a call that
// finds its endpoint UNAVAILABLE is tried once on each of the others, and
// the client stays on the first that answers. Every call has a deadline
// (rpc_timeout). Errors name etcd, the endpoint and the key.
//
// Thread-safe.
#ifndef PS_COORD_ETCD_CLIENT_H_
#define PS_COORD_ETCD_CLIENT_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "common/security_options.h"
#include "coord/coordinator_address.h"

namespace grpc {
class ClientContext;
}  // namespace grpc

namespace etcdserverpb {
class KV;
class Lease;
class Watch;
}  // namespace etcdserverpb

namespace ps {

class EtcdClient {
 public:
  struct KeyValue {
    std::string key;
    std::string value;
    int64_t lease = 0;         // 0: none
    int64_t mod_revision = 0;  // etcd's revision of its last change
  };

  // Opens channels to the endpoints (no call is made: an etcd that is down
  // shows in the first call), with `security` as the process's own
  // channels have it (rpc/credentials.h): with a CA, TLS verified against
  // it, presenting the process's certificate (etcd --client-cert-auth);
  // without, plaintext, to loopback only unless `insecure`. Its bearer
  // token and tls_server_name are not used (they are for the servers).
  // INVALID_ARGUMENT for an empty address or options CheckSecurityOptions
  // refuses.
  static absl::StatusOr<std::unique_ptr<EtcdClient>> Connect(
      const CoordinatorAddress& address, const SecurityOptions& security = SecurityOptions(),
      absl::Duration rpc_timeout = absl::Seconds(5));
  ~EtcdClient();

  EtcdClient(const EtcdClient&) = delete;
  EtcdClient& operator=(const EtcdClient&) = delete;

  // A new lease of `ttl` (whole seconds, rounded up; etcd may raise it to
  // its minimum); its id.
  absl::StatusOr<int64_t> GrantLease(absl::Duration ttl);
  // Renews `lease` once; NOT_FOUND when etcd no longer has it (expired or
  // revoked: its keys are gone).
  absl::Status KeepAlive(int64_t lease);
  // Ends `lease` now, deleting its keys. OK if it had ended already.
  absl::Status RevokeLease(int64_t lease);

  // Sets `key` (with `lease`, 0 = none).
  absl::Status Put(const std::string& key, const std::string& value, int64_t lease = 0);
  // Sets `key` only if it does not exist, in one transaction: whether it
  // was set.
  absl::StatusOr<bool> PutIfAbsent(const std::string& key, const std::string& value, int64_t lease);
  // Sets `key` only if its last change is `mod_revision` (0: only if it
  // does not exist), in one transaction: whether it was set. The
  // compare-and-swap of a record that several processes change.
  absl::StatusOr<bool> CompareAndPut(const std::string& key, int64_t mod_revision,
                                     const std::string& value);
  // A record that several processes change, read, changed and written
  // back: `change` gets its value (nullopt: absent) and returns the new
  // one, nullopt to leave it as it is, or an error that ends the update.
  // The write is a CompareAndPut on the revision read; when another writer
  // got there first, it reads the record again and asks `change` again, up
  // to `tries` times (then ABORTED naming the key). The value stored
  // afterwards (the one read when `change` left it).
  using Change =
      std::function<absl::StatusOr<std::optional<std::string>>(const std::optional<std::string>&)>;
  absl::StatusOr<std::optional<std::string>> Update(const std::string& key, const Change& change,
                                                    int tries = 10);
  // `key` alone: nullopt when it does not exist.
  absl::StatusOr<std::optional<KeyValue>> Get(const std::string& key);
  // The keys that start with `prefix`, in key order; `revision` (if not
  // null): etcd's revision the listing is of.
  absl::StatusOr<std::vector<KeyValue>> List(const std::string& prefix,
                                             int64_t* revision = nullptr);
  // Deletes `key` (OK if absent).
  absl::Status Delete(const std::string& key);
  // Deletes every key that starts with `prefix` (OK if none does).
  absl::Status DeletePrefix(const std::string& prefix);

  // A change to a watched key: set (put) or deleted (with its lease, or by
  // Delete); a deleted key's value is empty. kv.mod_revision is etcd's
  // revision of the change.
  struct WatchEvent {
    bool put = false;
    KeyValue kv;
  };
  // Ends a Watch from another thread. Thread-safe.
  class WatchCanceller {
   public:
    void Cancel();
    bool cancelled() const;

   private:
    friend class EtcdClient;
    // Whether the watch may go on (false: cancelled already).
    bool Attach(grpc::ClientContext* ctx);
    void Detach();
    mutable absl::Mutex mu_;
    bool cancelled_ ABSL_GUARDED_BY(mu_) = false;
    grpc::ClientContext* ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  };
  // Streams the changes to the keys under `prefix` from `start_revision`
  // on (etcd sends the ones after it happened too), each batch to
  // `on_events` on this thread, until `cancel` is cancelled (OK) or the
  // stream ends: UNAVAILABLE when etcd goes away (kill, restart, lost
  // link: the channel's keepalive notices a silent one within 15 s),
  // OUT_OF_RANGE when etcd compacted start_revision away. On the current
  // endpoint only: a caller that lists again (List) falls over to another.
  absl::Status Watch(const std::string& prefix, int64_t start_revision, WatchCanceller* cancel,
                     const std::function<void(const std::vector<WatchEvent>&)>& on_events);

  // The endpoint the client uses now.
  std::string endpoint() const;

 private:
  struct Endpoint;
  EtcdClient(std::vector<std::unique_ptr<Endpoint>> endpoints, absl::Duration rpc_timeout);

  // Runs `call` on the current endpoint, then, while it is UNAVAILABLE, on
  // each other one; the first that answers becomes current. `what` starts
  // the error message.
  absl::Status Call(const std::string& what, const std::function<absl::Status(Endpoint&)>& call);
  // Puts `key` if its mod revision is `mod_revision` (0: absent).
  absl::StatusOr<bool> PutIf(const std::string& what, const std::string& key, int64_t mod_revision,
                             const std::string& value, int64_t lease);

  const std::vector<std::unique_ptr<Endpoint>> endpoints_;
  const absl::Duration rpc_timeout_;
  mutable absl::Mutex mu_;
  size_t current_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ps

#endif  // PS_COORD_ETCD_CLIENT_H_
