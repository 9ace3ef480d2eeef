#include "coord/etcd_client.h"

#include <functional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "etcd/etcdserver/etcdserverpb/rpc.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "rpc/credentials.h"

namespace ps {

struct EtcdClient::Endpoint {
  std::string address;
  std::unique_ptr<etcdserverpb::KV::Stub> kv;
  std::unique_ptr<etcdserverpb::Lease::Stub> lease;
  std::unique_ptr<etcdserverpb::Watch::Stub> watch;
};

namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

// The smallest key after every key that starts with `prefix` (etcd's
// range_end for a prefix); "\0" (every key) for an empty prefix.
std::string PrefixEnd(const std::string& prefix) {
  std::string end = prefix;
  while (!end.empty()) {
    if (static_cast<unsigned char>(end.back()) < 0xff) {
      end.back() = static_cast<char>(static_cast<unsigned char>(end.back()) + 1);
      return end;
    }
    end.pop_back();
  }
  return std::string(1, '\0');
}

}  // namespace

absl::StatusOr<std::unique_ptr<EtcdClient>> EtcdClient::Connect(const CoordinatorAddress& address,
                                                                const SecurityOptions& security,
                                                                absl::Duration rpc_timeout) {
  if (address.endpoints.empty()) {
    return absl::InvalidArgumentError("etcd: no endpoint");
  }
  SecurityOptions sec = security;
  sec.auth_token_file.clear();
  sec.tls_server_name.clear();
  std::vector<std::unique_ptr<Endpoint>> endpoints;
  for (const std::string& e : address.endpoints) {
    // A restarted etcd is found within a second (gRPC's default backoff
    // grows to two minutes).
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
    // A watch on an etcd that went silent (a lost link) ends: pings every
    // 10 s (etcd accepts one every 5 s), 5 s for the answer.
    args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, 10000);
    args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, 5000);
    absl::StatusOr<std::shared_ptr<grpc::Channel>> made = MakeSecureChannel(e, sec, args);
    if (!made.ok()) {
      return absl::Status(made.status().code(),
                          absl::StrCat("etcd ", e, ": ", made.status().message()));
    }
    std::shared_ptr<grpc::Channel> channel = *std::move(made);
    auto ep = std::make_unique<Endpoint>();
    ep->address = e;
    ep->kv = etcdserverpb::KV::NewStub(channel);
    ep->lease = etcdserverpb::Lease::NewStub(channel);
    ep->watch = etcdserverpb::Watch::NewStub(channel);
    endpoints.push_back(std::move(ep));
  }
  return std::unique_ptr<EtcdClient>(new EtcdClient(std::move(endpoints), rpc_timeout));
}

EtcdClient::EtcdClient(std::vector<std::unique_ptr<Endpoint>> endpoints, absl::Duration rpc_timeout)
    : endpoints_(std::move(endpoints)), rpc_timeout_(rpc_timeout) {}

EtcdClient::~EtcdClient() = default;

std::string EtcdClient::endpoint() const {
  absl::MutexLock l(&mu_);
  return endpoints_[current_]->address;
}

absl::Status EtcdClient::Call(const std::string& what,
                              const std::function<absl::Status(Endpoint&)>& call) {
  size_t first;
  {
    absl::MutexLock l(&mu_);
    first = current_;
  }
  absl::Status s;
  for (size_t k = 0; k < endpoints_.size(); ++k) {
    const size_t i = (first + k) % endpoints_.size();
    s = call(*endpoints_[i]);
    if (s.code() != absl::StatusCode::kUnavailable) {
      if (k > 0) {
        absl::MutexLock l(&mu_);
        current_ = i;
      }
      break;
    }
  }
  if (s.ok()) return s;
  return absl::Status(s.code(), absl::StrCat("etcd ", endpoints_[first]->address,
                                             endpoints_.size() > 1 ? " (and the others)" : "", ": ",
                                             what, ": ", s.message()));
}

absl::StatusOr<int64_t> EtcdClient::GrantLease(absl::Duration ttl) {
  int64_t id = 0;
  const int64_t seconds = absl::ToInt64Seconds(absl::Ceil(ttl, absl::Seconds(1)));
  absl::Status s = Call("grant a lease", [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::LeaseGrantRequest req;
    req.set_ttl(seconds < 1 ? 1 : seconds);
    etcdserverpb::LeaseGrantResponse resp;
    absl::Status st = FromGrpc(e.lease->LeaseGrant(&ctx, req, &resp));
    if (st.ok() && !resp.error().empty()) st = absl::InternalError(resp.error());
    id = resp.id();
    return st;
  });
  if (!s.ok()) return s;
  return id;
}

absl::Status EtcdClient::KeepAlive(int64_t lease) {
  return Call(absl::StrCat("renew lease ", lease), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    auto stream = e.lease->LeaseKeepAlive(&ctx);
    etcdserverpb::LeaseKeepAliveRequest req;
    req.set_id(lease);
    etcdserverpb::LeaseKeepAliveResponse resp;
    const bool answered = stream->Write(req) && stream->Read(&resp);
    stream->WritesDone();
    absl::Status st = FromGrpc(stream->Finish());
    if (!st.ok()) return st;
    if (!answered) return absl::UnavailableError("the keep-alive stream ended without an answer");
    if (resp.ttl() <= 0) return absl::NotFoundError("the lease has expired");
    return absl::OkStatus();
  });
}

absl::Status EtcdClient::RevokeLease(int64_t lease) {
  absl::Status s = Call(absl::StrCat("revoke lease ", lease), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::LeaseRevokeRequest req;
    req.set_id(lease);
    etcdserverpb::LeaseRevokeResponse resp;
    return FromGrpc(e.lease->LeaseRevoke(&ctx, req, &resp));
  });
  // etcd answers NOT_FOUND for a lease that ended already.
  return s.code() == absl::StatusCode::kNotFound ? absl::OkStatus() : s;
}

absl::Status EtcdClient::Put(const std::string& key, const std::string& value, int64_t lease) {
  return Call(absl::StrCat("put \"", key, "\""), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::PutRequest req;
    req.set_key(key);
    req.set_value(value);
    req.set_lease(lease);
    etcdserverpb::PutResponse resp;
    return FromGrpc(e.kv->Put(&ctx, req, &resp));
  });
}

absl::StatusOr<bool> EtcdClient::PutIfAbsent(const std::string& key, const std::string& value,
                                             int64_t lease) {
  return PutIf(absl::StrCat("create \"", key, "\""), key, 0, value, lease);
}

absl::StatusOr<bool> EtcdClient::CompareAndPut(const std::string& key, int64_t mod_revision,
                                               const std::string& value) {
  return PutIf(absl::StrCat("compare-and-put \"", key, "\" at revision ", mod_revision), key,
               mod_revision, value, 0);
}

absl::StatusOr<std::optional<std::string>> EtcdClient::Update(const std::string& key,
                                                              const Change& change, int tries) {
  for (int attempt = 0; attempt < tries; ++attempt) {
    ASSIGN_OR_RETURN(const std::optional<KeyValue> now, Get(key));
    std::optional<std::string> value;
    if (now.has_value()) value = now->value;
    ASSIGN_OR_RETURN(std::optional<std::string> next, change(value));
    if (!next.has_value()) return value;
    ASSIGN_OR_RETURN(const bool put,
                     CompareAndPut(key, now.has_value() ? now->mod_revision : 0, *next));
    if (put) return next;
  }
  return absl::AbortedError(absl::StrCat("etcd ", endpoint(), ": ", key, " kept changing under ",
                                         tries, " tries to update it; try again"));
}

absl::StatusOr<std::optional<EtcdClient::KeyValue>> EtcdClient::Get(const std::string& key) {
  std::optional<KeyValue> out;
  absl::Status s = Call(absl::StrCat("get \"", key, "\""), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::RangeRequest req;
    req.set_key(key);
    etcdserverpb::RangeResponse resp;
    absl::Status st = FromGrpc(e.kv->Range(&ctx, req, &resp));
    out.reset();
    for (const auto& kv : resp.kvs()) {
      if (kv.key() == key) out = KeyValue{kv.key(), kv.value(), kv.lease(), kv.mod_revision()};
    }
    return st;
  });
  if (!s.ok()) return s;
  return out;
}

absl::StatusOr<bool> EtcdClient::PutIf(const std::string& what, const std::string& key,
                                       int64_t mod_revision, const std::string& value,
                                       int64_t lease) {
  bool put = false;
  absl::Status s = Call(what, [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::TxnRequest req;
    etcdserverpb::Compare* c = req.add_compare();
    c->set_key(key);
    c->set_result(etcdserverpb::Compare::EQUAL);
    if (mod_revision == 0) {
      c->set_target(etcdserverpb::Compare::CREATE);
      c->set_create_revision(0);  // the key does not exist
    } else {
      c->set_target(etcdserverpb::Compare::MOD);
      c->set_mod_revision(mod_revision);
    }
    etcdserverpb::PutRequest* p = req.add_success()->mutable_request_put();
    p->set_key(key);
    p->set_value(value);
    p->set_lease(lease);
    etcdserverpb::TxnResponse resp;
    absl::Status st = FromGrpc(e.kv->Txn(&ctx, req, &resp));
    put = resp.succeeded();
    return st;
  });
  if (!s.ok()) return s;
  return put;
}

absl::StatusOr<std::vector<EtcdClient::KeyValue>> EtcdClient::List(const std::string& prefix,
                                                                   int64_t* revision) {
  std::vector<KeyValue> out;
  absl::Status s = Call(absl::StrCat("list \"", prefix, "\""), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::RangeRequest req;
    req.set_key(prefix.empty() ? std::string(1, '\0') : prefix);
    req.set_range_end(PrefixEnd(prefix));
    req.set_sort_order(etcdserverpb::RangeRequest::ASCEND);
    req.set_sort_target(etcdserverpb::RangeRequest::KEY);
    etcdserverpb::RangeResponse resp;
    absl::Status st = FromGrpc(e.kv->Range(&ctx, req, &resp));
    out.clear();
    for (const auto& kv : resp.kvs()) {
      out.push_back(KeyValue{kv.key(), kv.value(), kv.lease(), kv.mod_revision()});
    }
    if (revision != nullptr) *revision = resp.header().revision();
    return st;
  });
  if (!s.ok()) return s;
  return out;
}

absl::Status EtcdClient::Delete(const std::string& key) {
  return Call(absl::StrCat("delete \"", key, "\""), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::DeleteRangeRequest req;
    req.set_key(key);
    etcdserverpb::DeleteRangeResponse resp;
    return FromGrpc(e.kv->DeleteRange(&ctx, req, &resp));
  });
}

absl::Status EtcdClient::DeletePrefix(const std::string& prefix) {
  return Call(absl::StrCat("delete the keys under \"", prefix, "\""), [&](Endpoint& e) {
    grpc::ClientContext ctx;
    ctx.set_deadline(absl::ToChronoTime(absl::Now() + rpc_timeout_));
    etcdserverpb::DeleteRangeRequest req;
    req.set_key(prefix);
    req.set_range_end(PrefixEnd(prefix));
    etcdserverpb::DeleteRangeResponse resp;
    return FromGrpc(e.kv->DeleteRange(&ctx, req, &resp));
  });
}

void EtcdClient::WatchCanceller::Cancel() {
  absl::MutexLock l(&mu_);
  cancelled_ = true;
  if (ctx_ != nullptr) ctx_->TryCancel();
}

bool EtcdClient::WatchCanceller::cancelled() const {
  absl::MutexLock l(&mu_);
  return cancelled_;
}

bool EtcdClient::WatchCanceller::Attach(grpc::ClientContext* ctx) {
  absl::MutexLock l(&mu_);
  if (cancelled_) return false;
  ctx_ = ctx;
  return true;
}

void EtcdClient::WatchCanceller::Detach() {
  absl::MutexLock l(&mu_);
  ctx_ = nullptr;
}

absl::Status EtcdClient::Watch(
    const std::string& prefix, int64_t start_revision, WatchCanceller* cancel,
    const std::function<void(const std::vector<WatchEvent>&)>& on_events) {
  Endpoint* e;
  {
    absl::MutexLock l(&mu_);
    e = endpoints_[current_].get();
  }
  const std::string what = absl::StrCat("etcd ", e->address, ": watch \"", prefix, "\": ");
  grpc::ClientContext ctx;  // no deadline: it runs until cancelled or broken
  if (!cancel->Attach(&ctx)) return absl::OkStatus();
  auto stream = e->watch->Watch(&ctx);
  etcdserverpb::WatchRequest req;
  etcdserverpb::WatchCreateRequest* create = req.mutable_create_request();
  create->set_key(prefix.empty() ? std::string(1, '\0') : prefix);
  create->set_range_end(PrefixEnd(prefix));
  create->set_start_revision(start_revision);
  absl::Status result;
  if (stream->Write(req)) {
    etcdserverpb::WatchResponse resp;
    std::vector<WatchEvent> events;
    while (stream->Read(&resp)) {
      if (resp.canceled()) {
        result = resp.compact_revision() > 0
                     ? absl::OutOfRangeError(absl::StrCat(what, "revision ", start_revision,
                                                          " was compacted (etcd keeps from ",
                                                          resp.compact_revision(), ")"))
                     : absl::AbortedError(
                           absl::StrCat(what, "etcd cancelled it: ", resp.cancel_reason()));
        break;
      }
      events.clear();
      for (const mvccpb::Event& ev : resp.events()) {
        WatchEvent out;
        out.put = ev.type() == mvccpb::Event::PUT;
        out.kv = KeyValue{ev.kv().key(), ev.kv().value(), ev.kv().lease(), ev.kv().mod_revision()};
        events.push_back(std::move(out));
      }
      if (!events.empty()) on_events(events);
    }
  }
  cancel->Detach();
  // Broken off here (etcd cancelled the watch): end the stream, which etcd
  // keeps open. Otherwise it ended, and Finish says why.
  if (!result.ok()) ctx.TryCancel();
  const grpc::Status finished = stream->Finish();
  if (cancel->cancelled()) return absl::OkStatus();
  if (!result.ok()) return result;
  absl::Status s = FromGrpc(finished);
  if (s.ok()) s = absl::UnavailableError("the stream ended");
  return absl::Status(s.code(), absl::StrCat(what, s.message()));
}

}  // namespace ps
