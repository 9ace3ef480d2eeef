#include "server/ps_server.h"

#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <climits>
#include <optional>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/notification.h"
#include "common/status_macros.h"
#include "grpcpp/health_check_service_interface.h"
#include "grpcpp/server_builder.h"
#include "grpcpp/version_info.h"
#include "rpc/auth_processor.h"
#include "rpc/credentials.h"
#include "rpc/raw_wire.h"
#include "rpc/unix_socket.h"
#include "server/checkpoint/reshard.h"

namespace ps {
namespace {

// Turns on gRPC server reflection for the servers built from now on.
// libgrpc++_reflection registers its plugin with every ServerBuilder as soon
// as it is loaded, so the binaries do not link it: it is loaded only here.
absl::Status EnableReflection() {
  const std::string lib = absl::StrCat("libgrpc++_reflection.so.", GRPC_CPP_VERSION_MAJOR, ".",
                                       GRPC_CPP_VERSION_MINOR);
  if (dlopen(lib.c_str(), RTLD_NOW | RTLD_GLOBAL) == nullptr) {
    return absl::FailedPreconditionError(
        absl::StrCat("--reflection: cannot load ", lib, ": ", dlerror()));
  }
  return absl::OkStatus();
}

// HOST of a HOST:PORT listen address; INVALID_ARGUMENT naming `what` (the
// option) otherwise.
absl::StatusOr<std::string> HostOf(const std::string& address, absl::string_view what) {
  const size_t colon = address.rfind(':');
  if (colon == std::string::npos || colon == 0) {
    return absl::InvalidArgumentError(
        absl::StrCat(what, " address '", address, "' is not HOST:PORT"));
  }
  return address.substr(0, colon);
}

}  // namespace

absl::Status ServerOptions::Validate() const {
  const SpecLimits& limits = shard.spec_limits;
  constexpr int64_t kMaxElements = int64_t{1} << 40;
  if (limits.max_model_elements < 1 || limits.max_model_elements > kMaxElements ||
      limits.max_tensor_elements < 1 || limits.max_tensor_elements > kMaxElements) {
    return absl::InvalidArgumentError(
        "--max_model_elements and --max_tensor_elements must be in [1, 2^40]");
  }
  if (limits.max_tensors < 1 || limits.max_tensors >= int{kMaxSlicesPerMessage}) {
    return absl::InvalidArgumentError(
        absl::StrCat("--max_tensors must be in [1, ", kMaxSlicesPerMessage, ")"));
  }
  if (limits.max_name_bytes < 1 || limits.max_name_bytes > (1 << 20)) {
    return absl::InvalidArgumentError("--max_name_bytes must be in [1, 2^20]");
  }
  if (shard.stall_report_after < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--stall_report_after must be >= 0");
  }
  if (service.call_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--call_timeout must be >= 0");
  }
  if (shutdown_grace < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("--shutdown_grace must be >= 0");
  }
  if (max_concurrent_streams < 1) {
    return absl::InvalidArgumentError("--max_concurrent_streams must be >= 1");
  }
  if (checkpoints.every_versions < 0 || checkpoints.period < absl::ZeroDuration() ||
      checkpoints.keep < 1 || checkpoints.full_every < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("need --checkpoint_every >= 0, --checkpoint_secs >= 0, --checkpoint_keep >= 1 "
                     "and --checkpoint_full_every >= 1; got ",
                     checkpoints.every_versions, ", ", absl::FormatDuration(checkpoints.period),
                     ", ", checkpoints.keep, " and ", checkpoints.full_every));
  }
  if (checkpoints.restore_from.empty() != (checkpoints.restore_from_shards == 0) ||
      checkpoints.restore_from_shards < 0) {
    return absl::InvalidArgumentError(
        checkpoints.tables_only
            ? "--restore_tables_from and --restore_tables_shards (>= 1) go together"
            : "--restore_from and --restore_shards (>= 1) go together");
  }
  if (shard.mode != Mode::kSync &&
      (shard.sync_rule.quorum != 0 || shard.sync_rule.min_workers != 1)) {
    return absl::InvalidArgumentError("--sync_quorum and --min_workers apply to --mode=sync only");
  }
  if (shard.mode == Mode::kSsp && shard.staleness < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("--staleness must be >= 0, got ", shard.staleness));
  }
  return absl::OkStatus();
}

int MaxReceiveMessageBytes(const ServerOptions& options) {
  const SpecLimits& l = options.shard.spec_limits;
  const int64_t shards = std::max(1, options.shard.num_shards);
  const int64_t elements = l.max_model_elements / shards + l.max_tensors;  // rounding
  // A TensorSlice header: tags, name, shape and offset/length varints.
  const int64_t per_slice = 64 + l.max_name_bytes + 10 * int64_t{l.max_rank};
  const int64_t bytes = 4 * elements + l.max_tensors * per_slice + 1024;
  return static_cast<int>(std::min<int64_t>(bytes, INT_MAX));
}

namespace {

// --restore_from (--restore_tables_from: its tables only): this shard's
// part of a checkpoint of another shard count, into `shard`.
absl::Status RestoreResharded(const ServerOptions& options, Shard* shard) {
  const ServerOptions::Checkpoints& c = options.checkpoints;
  const ShardOptions& so = options.shard;
  const std::string who = absl::StrCat("shard ", so.shard_id, ": ");
  const std::string flag = c.tables_only ? "--restore_tables_from" : "--restore_from";
  int64_t version = 0;
  std::vector<EmbeddingTableState> tables;
  absl::Status s;
  if (c.tables_only) {
    absl::StatusOr<ReshardedTables> loaded =
        LoadTablesForShard(c.restore_from, c.restore_from_shards, so.shard_id, so.num_shards,
                           so.spec_limits, so.tables.read_tier_snapshot);
    s = loaded.ok() ? shard->ImportTables(loaded->tables) : loaded.status();
    if (s.ok()) {
      version = loaded->version;
      tables = std::move(loaded->tables);
    }
  } else {
    absl::StatusOr<ShardState> loaded =
        LoadStateForShard(c.restore_from, c.restore_from_shards, so.shard_id, so.num_shards,
                          so.spec_limits, so.tables.read_tier_snapshot);
    s = loaded.ok() ? shard->LoadCheckpoint(*loaded) : loaded.status();
    if (s.ok()) {
      version = loaded->version;
      tables = std::move(loaded->tables);
    }
  }
  if (!s.ok()) return absl::Status(s.code(), absl::StrCat(who, flag, ": ", s.message()));
  if (so.log) {
    int64_t rows = 0;
    for (const EmbeddingTableState& t : tables) rows += t.contents.ids.size();
    so.log(absl::StrCat(who, "restored ", c.tables_only ? "" : "the dense state and ",
                        tables.size(), " tables (", rows, " rows) of version ", version, " of ",
                        c.restore_from_shards, " shards in ", c.restore_from));
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::unique_ptr<PsServer>> PsServer::Start(const ServerOptions& options) {
  RETURN_IF_ERROR(options.Validate());
  const bool unix_socket = IsUnixAddress(options.listen);
  std::string host, socket_path;
  if (unix_socket) {
    ASSIGN_OR_RETURN(socket_path, UnixSocketPath(options.listen, "--listen"));
  } else {
    ASSIGN_OR_RETURN(host, HostOf(options.listen, "listen"));
  }
  std::string health_host;
  if (IsUnixAddress(options.health_listen)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--health_listen takes HOST:PORT only (TCP), not '", options.health_listen, "'"));
  }
  if (!options.health_listen.empty()) {
    ASSIGN_OR_RETURN(health_host, HostOf(options.health_listen, "health listen"));
  }
  RETURN_IF_ERROR(CheckSecurityOptions(options.security, options.listen, /*server=*/true));
  std::unique_ptr<PsServer> s(new PsServer(options));
  ShardOptions shard_options = options.shard;
  shard_options.worker_registry = !options.coordinator.address.empty();
  const ServerOptions::Checkpoints& c = options.checkpoints;
  if (!c.dir.empty()) {
    CheckpointStoreOptions so;
    so.dir = c.dir;
    so.shard_id = options.shard.shard_id;
    so.num_shards = options.shard.num_shards;
    so.keep = c.keep;
    so.log = options.shard.log;
    ASSIGN_OR_RETURN(s->store_, CheckpointStore::Open(so));
    shard_options.checkpoint_every = c.every_versions;
    shard_options.checkpoint_full_every = c.full_every;
    shard_options.tables.track_changes = c.full_every > 1;
    shard_options.tables.tier_snapshot_dir = s->store_->TierStagingDir();
    // The checkpointer exists before the first push can arrive.
    shard_options.on_checkpoint = [server = s.get()](ShardState state) {
      server->checkpointer_->Offer(std::move(state));
    };
  }
  ASSIGN_OR_RETURN(s->shard_, Shard::Create(shard_options));
  bool restored_own = false;
  if (s->store_ != nullptr) {
    ASSIGN_OR_RETURN(std::optional<CheckpointStore::Loaded> loaded,
                     s->store_->LoadNewest(options.shard.spec_limits));
    restored_own = loaded.has_value();
    const std::string who = absl::StrCat("shard ", options.shard.shard_id, ": ");
    if (loaded.has_value()) {
      absl::Status restored = s->shard_->LoadCheckpoint(loaded->state);
      if (!restored.ok()) {
        return absl::Status(restored.code(), absl::StrCat("cannot restore checkpoint ",
                                                          loaded->path, ": ",
                                                          restored.message()));
      }
    }
    if (options.shard.log) {
      options.shard.log(
          loaded.has_value()
              ? absl::StrCat(who, "restored checkpoint ", loaded->path, " (version ",
                             loaded->state.version, ")",
                             loaded->deltas > 0
                                 ? absl::StrCat(", a full one and ", loaded->deltas,
                                                loaded->deltas == 1 ? " delta" : " deltas")
                                 : "",
                             "; ", IncarnationName(s->shard_->incarnation()))
              : absl::StrCat(who, "no checkpoint in ", c.dir, "; starting empty, ",
                             IncarnationName(s->shard_->incarnation())));
    }
    CheckpointerOptions co;
    co.shard_id = options.shard.shard_id;
    co.period = c.period;
    co.export_state = [shard = s->shard_.get()] { return shard->ExportCheckpoint(); };
    co.restart_chain = [shard = s->shard_.get()] { shard->RestartCheckpointChain(); };
    co.log = options.shard.log;
    co.clock = options.shard.clock;  // the shard's: RealClock() unless a test says
    if (loaded.has_value()) {
      co.restored_version = loaded->state.version;
      co.restored_path = loaded->path;
    }
    s->checkpointer_ = std::make_unique<Checkpointer>(s->store_.get(), std::move(co));
  }
  if (!c.restore_from.empty() && !restored_own) {
    RETURN_IF_ERROR(RestoreResharded(options, s->shard_.get()));
  }
  ServiceOptions service_options = options.service;
  s->route_ = std::make_shared<RouteGuard>(options.shard.shard_id, options.shard.num_shards);
  service_options.route = s->route_;
  if (!options.metrics_listen.empty()) {
    s->rpc_metrics_ = std::make_shared<RpcMetrics>();
    service_options.rpc_metrics = s->rpc_metrics_;
  }
  if (s->store_ != nullptr) {
    service_options.rollback = [server = s.get()](int worker_id, int64_t max_version) {
      return server->RollBack(worker_id, max_version);
    };
  }
  if (s->checkpointer_ != nullptr) {
    service_options.checkpoint = [checkpointer = s->checkpointer_.get()](
                                     Checkpointer::WriteDone done) {
      checkpointer->RequestWrite(std::move(done));
    };
  }
  const SecurityOptions& sec = options.security;
  std::shared_ptr<AuthProcessor> processor;
  if (CanAuthenticate(sec, options.listen) &&
      (!sec.tls_ca.empty() || !sec.auth_token_file.empty())) {
    std::optional<TokenTable> tokens;
    if (!sec.auth_token_file.empty()) {
      ASSIGN_OR_RETURN(tokens, TokenTable::Load(sec.auth_token_file));
    }
    service_options.authenticator =
        std::make_shared<Authenticator>(!sec.tls_ca.empty(), std::move(tokens));
    AuthProcessor::OnRefused on_refused;
    if (s->rpc_metrics_ != nullptr) {
      on_refused = [metrics = s->rpc_metrics_](absl::string_view method, grpc::StatusCode code) {
        metrics->RecordRefused(method, static_cast<int>(code));
      };
    }
    processor = std::make_shared<AuthProcessor>(service_options.authenticator,
                                                std::move(on_refused));
  }
  ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> credentials,
                   MakeServerCredentials(sec, processor, options.listen));
  s->service_ = std::make_unique<ParameterServerService>(s->shard_.get(), service_options);

  grpc::EnableDefaultHealthCheckService(true);
  if (options.reflection) RETURN_IF_ERROR(EnableReflection());
  if (!options.health_listen.empty()) {
    int health_port = 0;
    grpc::ServerBuilder health;
    // Plaintext (empty SecurityOptions), anywhere: it serves nothing but
    // health.
    health.AddListeningPort(options.health_listen,
                            *MakeServerCredentials(SecurityOptions(), nullptr), &health_port);
    s->health_generic_ = std::make_unique<grpc::CallbackGenericService>();
    health.RegisterCallbackGenericService(s->health_generic_.get());
    s->health_server_ = health.BuildAndStart();
    if (s->health_server_ == nullptr || health_port == 0) {
      return absl::UnavailableError(absl::StrCat("cannot listen on ", options.health_listen,
                                                 " (address in use or invalid?)"));
    }
    s->health_address_ = absl::StrCat(health_host, ":", health_port);
  }
  if (unix_socket) {
    // gRPC would unlink any socket at the path, a running server's too.
    bool removed = false;
    RETURN_IF_ERROR(PrepareUnixSocket(socket_path, "--listen", &removed));
    if (removed && options.shard.log) {
      options.shard.log(absl::StrCat("shard ", options.shard.shard_id,
                                     ": removed the stale socket ", socket_path,
                                     " (nothing listened on it)"));
    }
  }
  grpc::ServerBuilder builder;
  builder.AddListeningPort(unix_socket ? absl::StrCat(kUnixPrefix, socket_path) : options.listen,
                           credentials, &s->port_);
  builder.RegisterService(s->service_.get());
  // Requests may be as large as the limits let a model be, no larger.
  builder.SetMaxReceiveMessageSize(MaxReceiveMessageBytes(options));
  builder.SetMaxSendMessageSize(INT_MAX);
  // Compressed requests are refused (UNIMPLEMENTED): a small compressed
  // message could otherwise inflate past any size check. float32 tensors
  // barely compress anyway.
  builder.AddChannelArgument(GRPC_COMPRESSION_CHANNEL_ENABLED_ALGORITHMS_BITSET,
                             1 << GRPC_COMPRESS_NONE);
  builder.AddChannelArgument(GRPC_ARG_MAX_CONCURRENT_STREAMS, options.max_concurrent_streams);
  // Clients ping idle connections to notice dead peers (ClientOptions::
  // keepalive, at least 1 s apart); accept them however quiet the connection,
  // e.g. while a sync step waits for a slow worker.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 1000);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  if (s->rpc_metrics_ != nullptr) {
    builder.experimental().SetInterceptorCreators(RpcMetricsInterceptors(s->rpc_metrics_));
  }
  s->server_ = builder.BuildAndStart();
  if (s->server_ == nullptr || s->port_ == 0) {
    return absl::UnavailableError(
        absl::StrCat("cannot listen on ", options.listen, " (address in use or invalid?)"));
  }
  if (unix_socket) {
    s->address_ = absl::StrCat(kUnixPrefix, socket_path);
    s->socket_path_ = socket_path;
    s->socket_inode_ = UnixSocketInode(socket_path);
  } else {
    s->address_ = absl::StrCat(host, ":", s->port_);
  }
  if (!options.metrics_listen.empty()) {
    std::function<bool()> reachable;
    if (!options.coordinator.address.empty()) {
      reachable = [server = s.get()] { return server->CoordinatorReachable(); };
    }
    s->collector_ = std::make_shared<ServerCollector>(s->shard_.get(), s->rpc_metrics_.get(),
                                                      s->checkpointer_.get(), absl::Now(),
                                                      std::move(reachable));
    MetricsEndpointOptions mo;
    mo.listen = options.metrics_listen;
    mo.security = options.security;
    ASSIGN_OR_RETURN(s->metrics_, MetricsEndpoint::Start(mo, {s->collector_}));
  }
  if (!options.coordinator.address.empty()) RETURN_IF_ERROR(s->JoinCoordinator());
  return s;
}

PsServer::~PsServer() {
  if (!Shutdown().ok()) {
    // gRPC still holds calls that reference the shard and service; freeing
    // them would be worse than leaking them.
    server_.release();
    service_.release();
    shard_.release();
  }
}

absl::Status PsServer::Shutdown() {
  if (shut_down_) return shutdown_status_;
  shut_down_ = true;
  // Out of the membership at once, before the calls drain; the etcd calls
  // outside the lock that /metrics takes.
  std::unique_ptr<Registration> registration;
  std::unique_ptr<MemberWatch> watch;
  std::unique_ptr<ShardMapWatch> map_watch;
  {
    absl::MutexLock l(&coordinator_mu_);
    registration = std::move(registration_);
    watch = std::move(worker_watch_);
    map_watch = std::move(map_watch_);
  }
  map_watch.reset();
  registration.reset();
  watch.reset();
  if (shard_ != nullptr) shard_->Close();
  if (health_server_ != nullptr) {
    health_server_->GetHealthCheckService()->Shutdown();  // NOT_SERVING from now on
  }
  if (server_ == nullptr) return absl::OkStatus();  // Start() failed before the server ran
  server_->GetHealthCheckService()->Shutdown();
  // grpc::Server::Shutdown cancels what still runs at the deadline and then
  // waits for the reactors to finish, which ours always do once cancelled.
  // Should one not, don't hang: report it after a margin.
  auto done = std::make_shared<absl::Notification>();
  grpc::Server* server = server_.get();
  const absl::Duration grace = options_.shutdown_grace;
  std::thread([server, done, grace] {
    server->Shutdown(absl::ToChronoTime(absl::Now() + grace));
    server->Wait();
    done->Notify();
  }).detach();
  if (!done->WaitForNotificationWithTimeout(grace + absl::Seconds(5))) {
    shutdown_status_ = absl::DeadlineExceededError(absl::StrCat(
        "calls still running ", absl::FormatDuration(grace + absl::Seconds(5)),
        " after shutdown began (--shutdown_grace=", absl::FormatDuration(grace), ")"));
  }
  // No push can arrive any more: the final checkpoint holds everything
  // acknowledged (logged; a failure leaves the earlier ones).
  if (checkpointer_ != nullptr && !fenced_) checkpointer_->WriteNow().IgnoreError();
  // The socket file goes with the server (if it is still ours).
  if (socket_inode_.has_value()) RemoveUnixSocket(socket_path_, *socket_inode_);
  if (health_server_ != nullptr) {
    health_server_->Shutdown(absl::ToChronoTime(absl::Now() + absl::Seconds(1)));
  }
  if (metrics_ != nullptr) metrics_->Shutdown();
  return shutdown_status_;
}

absl::StatusOr<bool> PsServer::RollBack(int worker_id, int64_t max_version) {
  const ShardOptions& o = options_.shard;
  if (shard_->Stats().version <= max_version) return false;
  ASSIGN_OR_RETURN(std::optional<CheckpointStore::Loaded> loaded,
                   store_->LoadNewest(o.spec_limits, max_version));
  if (!loaded.has_value()) {
    return absl::FailedPreconditionError(absl::StrCat(
        "shard ", o.shard_id, " has no valid checkpoint at or below version ", max_version));
  }
  const int64_t was = shard_->Stats().version;
  RETURN_IF_ERROR(shard_->RollBackToCheckpoint(loaded->state));
  if (o.log) {
    o.log(absl::StrCat("shard ", o.shard_id, ": rolled back from version ", was,
                       " to checkpoint ", loaded->path, " (version ", loaded->state.version,
                       "), asked by worker ", worker_id,
                       ": the shards restarted from different versions"));
  }
  return true;
}

}  // namespace ps
