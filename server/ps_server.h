// PsServer: a running parameter-server shard: a Shard, its gRPC service and
// the standard grpc.health.v1 health service (plus server reflection when
// asked), listening on one address with the transport security of
// rpc/credentials.h and, with TLS, the authentication and authorization of
// rpc/auth_processor.h; optionally the health service alone, in plaintext,
// on a second address for probes; and, with a checkpoint directory, the shard's checkpoints:
// the newest valid one is restored at Start, later ones are written as the
// options say, and a final one at Shutdown.
//
// Used by ps_server's main() and by tests, which start real servers in-process
// on ephemeral ports ("127.0.0.1:0"). Thread-safe. Owns the shard and server.
#ifndef PS_SERVER_PS_SERVER_H_
#define PS_SERVER_PS_SERVER_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "coord/etcd_client.h"
#include "coord/member_watch.h"
#include "coord/registration.h"
#include "coord/shard_map_watch.h"
#include "grpcpp/generic/async_generic_service.h"
#include "grpcpp/server.h"
#include "rpc/credentials.h"
#include "rpc/metrics_endpoint.h"
#include "server/checkpoint/checkpoint_store.h"
#include "server/checkpoint/checkpointer.h"
#include "server/core/shard.h"
#include "server/metrics_collector.h"
#include "server/rpc_metrics.h"
#include "server/service.h"

namespace ps {

struct ServerOptions {
  // HOST:PORT to listen on; port 0 picks a free port (see PsServer::address()).
  // Or unix:/ABS/PATH, a unix socket, in a folder of this user with mode
  // 0700 (rpc/unix_socket.h): a stale socket file there is replaced, a live
  // one refused, and the file removed at Shutdown.
  // Plaintext only on loopback or a unix socket unless security.insecure.
  std::string listen = "127.0.0.1:50051";
  // TLS, client certificates, bearer tokens (rpc/credentials.h).
  SecurityOptions security;
  // HOST:PORT of a plaintext port serving only grpc.health.v1 (for
  // Kubernetes and compose probes, which cannot present a client
  // certificate); empty: none. It tells SERVING or NOT_SERVING, nothing else.
  std::string health_listen;
  // HOST:PORT of the /metrics port (rpc/metrics_endpoint.h: the same
  // security rules and TLS files as the gRPC port; readable by the reader
  // and admin identities); empty: none. Port 0 picks a free one.
  std::string metrics_listen;
  // Serve gRPC server reflection (grpc.reflection.v1alpha), from
  // libgrpc++_reflection, loaded at Start. Once loaded, gRPC adds it to
  // every server the process builds later.
  bool reflection = false;
  ShardOptions shard;
  ServiceOptions service;
  // Concurrent calls (streams and unary calls, waiting pulls included) one
  // client connection may have open; more wait for a free slot in gRPC.
  int max_concurrent_streams = 1000;
  // How long Shutdown lets calls finish before it cancels them.
  absl::Duration shutdown_grace = absl::Seconds(10);

  // Checkpoints (server/checkpoint/checkpoint_store.h); none when dir is empty.
  struct Checkpoints {
    std::string dir;
    int64_t every_versions = 0;                       // 0: none by version
    absl::Duration period = absl::ZeroDuration();     // 0: none by time
    int keep = 3;                                     // newest full checkpoints kept
    int64_t full_every = 1;  // every Nth checkpoint full, deltas between; 1: all full
    // A checkpoint of another shard count (server/checkpoint/reshard.h),
    // for a shard with no checkpoint of its own: its directory (empty:
    // none), that shard count (>= 1), and whether only its embedding tables
    // are restored (the dense model then starts anew with worker 0's init)
    // or the whole state, re-cut for this shard.
    std::string restore_from;
    int restore_from_shards = 0;
    bool tables_only = false;
  };
  Checkpoints checkpoints;

  // The coordinator of an elastic cluster (coord/, docs/elastic.md). With
  // an address, the server registers in etcd as member servers/<shard_id>
  // of registration.job (its value the address it serves on) once it
  // serves, holding the key with a lease it renews, and leaves first thing
  // at Shutdown. Start fails, naming the holder, if a live server holds
  // that shard id, and when the job's settings in etcd (coord/
  // job_settings.h) are another running cluster's. In sync and SSP mode
  // the steps then wait for the workers registered in etcd
  // (ShardOptions::worker_registry, a coord/member_watch.h on them).
  // Empty: none, a fixed cluster.
  struct Coordinator {
    std::string address;  // etcd://HOST:PORT[,HOST:PORT...]
    RegistrationOptions registration;
  };
  Coordinator coordinator;

  // OK, or INVALID_ARGUMENT naming ps_server's flag, for what the shard does
  // not check itself (ShardOptions' own rules are checked by Shard::Create):
  // the size limits, negative durations, max_concurrent_streams < 1, the
  // checkpoint options, and a sync rule other than the default in async
  // mode. PsServer::Start calls it first.
  absl::Status Validate() const;
};

// The largest message a server of these options accepts: what the largest
// model the limits allow needs on this shard (its share of
// max_model_elements as float32, plus every tensor's slice header), capped
// at gRPC's 2 GiB. Compressed messages are refused outright, so this bounds
// what a request can make the server buffer.
int MaxReceiveMessageBytes(const ServerOptions& options);

class PsServer {
 public:
  // Builds and starts the server, after restoring the newest valid
  // checkpoint of options.checkpoints.dir (logging the file, or the damaged
  // ones it skipped). UNAVAILABLE if the address cannot be bound; the
  // checkpoint store's error if the directory is unusable.
  static absl::StatusOr<std::unique_ptr<PsServer>> Start(const ServerOptions& options);

  // Shuts down (see Shutdown) if still running.
  ~PsServer();

  PsServer(const PsServer&) = delete;
  PsServer& operator=(const PsServer&) = delete;

  // HOST:PORT actually bound (the real port when the options asked for 0);
  // unix:/ABS/PATH for a unix socket.
  const std::string& address() const { return address_; }
  int port() const { return port_; }
  // The health port's HOST:PORT; empty without options.health_listen.
  const std::string& health_address() const { return health_address_; }
  // The metrics port's HOST:PORT; empty without options.metrics_listen.
  std::string metrics_address() const {
    return metrics_ == nullptr ? std::string() : metrics_->address();
  }
  Shard* shard() { return shard_.get(); }

  // Fails waiting pulls with UNAVAILABLE, marks the health service NOT_SERVING
  // and stops the server, cancelling calls still running after
  // options.shutdown_grace. Returns DEADLINE_EXCEEDED if calls still have
  // not ended a further 5 s after that (gRPC has not let go of them; the
  // caller should then exit the process); OK once all ended. Then, with
  // checkpoints, writes a final one (a failure is logged, not returned).
  // Idempotent.
  absl::Status Shutdown();

 private:
  explicit PsServer(const ServerOptions& options) : options_(options) {}

  // InitRequest.rollback: restores the newest valid checkpoint at or below
  // `max_version` if the shard is above it and untouched since its own
  // restore (Shard::RollBackToCheckpoint); true if it rolled back.
  absl::StatusOr<bool> RollBack(int worker_id, int64_t max_version);
  // With a coordinator, once serving: publishes the job's settings,
  // registers, and (sync, SSP) starts the watch on the workers
  // (ps_server_coordinator.cc).
  absl::Status JoinCoordinator();
  // /metrics' ps_server_coordinator_reachable: the registration renews and
  // the watch on the workers (if any) runs.
  bool CoordinatorReachable() const ABSL_LOCKS_EXCLUDED(coordinator_mu_);

  const ServerOptions options_;

  std::unique_ptr<CheckpointStore> store_;  // null without checkpoints
  std::unique_ptr<Shard> shard_;
  // Destroyed before the shard it exports; null without checkpoints.
  std::unique_ptr<Checkpointer> checkpointer_;
  std::unique_ptr<ParameterServerService> service_;
  std::unique_ptr<grpc::Server> server_;
  // The health port: gRPC's default health service, and a generic service
  // that answers every other method UNIMPLEMENTED (gRPC builds no server
  // without a callback or synchronous service).
  std::unique_ptr<grpc::CallbackGenericService> health_generic_;
  std::unique_ptr<grpc::Server> health_server_;  // null without health_listen
  // With metrics_listen: the calls' counts (filled by an interceptor), what
  // /metrics reads, and its port, stopped in Shutdown.
  std::shared_ptr<RpcMetrics> rpc_metrics_;
  // The check of each call's route (rpc/route.h); with a coordinator, the
  // map version this server took its shard at is set as it publishes.
  std::shared_ptr<RouteGuard> route_;
  std::shared_ptr<ServerCollector> collector_;
  std::unique_ptr<MetricsEndpoint> metrics_;
  // With a coordinator: the etcd client and this server's membership key
  // (left, and destroyed, first in Shutdown).
  std::unique_ptr<EtcdClient> etcd_;
  // Guards the three below; /metrics reads the first two
  // (CoordinatorReachable).
  mutable absl::Mutex coordinator_mu_;
  std::unique_ptr<Registration> registration_ ABSL_GUARDED_BY(coordinator_mu_);
  // Sync and SSP; stopped first.
  std::unique_ptr<MemberWatch> worker_watch_ ABSL_GUARDED_BY(coordinator_mu_);
  // The watch on the shard map, which fences this server (below) once the
  // map gives its shard to another address.
  std::unique_ptr<ShardMapWatch> map_watch_ ABSL_GUARDED_BY(coordinator_mu_);
  // Taken over: the shard refuses requests, and Shutdown writes no final
  // checkpoint (the shard's new server owns its checkpoints now).
  std::atomic<bool> fenced_{false};
  std::string address_;
  std::string health_address_;
  int port_ = 0;
  // A unix socket's file and the inode it had once bound (none for TCP).
  std::string socket_path_;
  std::optional<ino_t> socket_inode_;
  bool shut_down_ = false;  // only touched by Shutdown, which callers serialize
  absl::Status shutdown_status_;
};

}  // namespace ps

#endif  // PS_SERVER_PS_SERVER_H_
