#include "coord/registration.h"

#include <unistd.h>

#include <algorithm>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ps {

absl::Status RegistrationOptions::Validate() const {
  if (job.empty() || absl::StrContains(job, '/')) {
    return absl::InvalidArgumentError(
        absl::StrCat("job \"", job, "\": must be non-empty and without '/'"));
  }
  if (ttl < absl::Seconds(2)) {
    return absl::InvalidArgumentError(
        absl::StrCat("coordinator lease ttl ", absl::FormatDuration(ttl), ": must be at least 2s"));
  }
  return absl::OkStatus();
}

std::string JobPrefix(const std::string& job) { return absl::StrCat("/ps/", job, "/"); }

std::string RolePrefix(const std::string& job, const std::string& role) {
  return absl::StrCat(JobPrefix(job), role, "/");
}

std::string MemberKey(const std::string& job, const std::string& role, int id) {
  return absl::StrCat(RolePrefix(job, role), id);
}

bool MemberIdOfKey(const std::string& key, const std::string& prefix, int* id) {
  return key.size() > prefix.size() && absl::StartsWith(key, prefix) &&
         absl::SimpleAtoi(absl::string_view(key).substr(prefix.size()), id) && *id >= 0;
}

absl::StatusOr<std::vector<Member>> ListMembers(EtcdClient* etcd, const std::string& job) {
  std::vector<Member> out;
  for (const char* role : {"servers", "workers"}) {
    const std::string prefix = RolePrefix(job, role);
    absl::StatusOr<std::vector<EtcdClient::KeyValue>> kvs = etcd->List(prefix);
    if (!kvs.ok()) return kvs.status();
    std::vector<Member> members;
    for (const EtcdClient::KeyValue& kv : *kvs) {
      int id;
      if (!MemberIdOfKey(kv.key, prefix, &id)) continue;
      members.push_back(Member{role, id, kv.value});
    }
    std::sort(members.begin(), members.end(),
              [](const Member& a, const Member& b) { return a.id < b.id; });
    out.insert(out.end(), members.begin(), members.end());
  }
  return out;
}

namespace {

// Grants a lease and creates `key` under it; ALREADY_EXISTS (the lease
// revoked) when a live member holds the key.
absl::StatusOr<int64_t> Claim(EtcdClient* etcd, const std::string& key, const std::string& value,
                              absl::Duration ttl) {
  absl::StatusOr<int64_t> lease = etcd->GrantLease(ttl);
  if (!lease.ok()) return lease.status();
  absl::StatusOr<bool> put = etcd->PutIfAbsent(key, value, *lease);
  if (put.ok() && *put) return *lease;
  etcd->RevokeLease(*lease).IgnoreError();  // it would expire anyway
  if (!put.ok()) return put.status();
  return absl::AlreadyExistsError(absl::StrCat("\"", key, "\" is held by a live member"));
}

}  // namespace

absl::StatusOr<std::unique_ptr<Registration>> Registration::Join(
    EtcdClient* etcd, const std::string& role, int id, const std::string& value,
    const RegistrationOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  const std::string key = MemberKey(options.job, role, id);
  absl::StatusOr<int64_t> lease = Claim(etcd, key, value, options.ttl);
  if (lease.status().code() == absl::StatusCode::kAlreadyExists) {
    absl::StatusOr<std::vector<EtcdClient::KeyValue>> holder = etcd->List(key);
    return absl::AlreadyExistsError(
        absl::StrCat(role, " ", id, " of job ", options.job, " is taken (", key, " = \"",
                     holder.ok() && !holder->empty() ? holder->front().value : "?",
                     "\"): another live process registered it; stop it, or wait for its lease (",
                     absl::FormatDuration(options.ttl), ") to expire"));
  }
  if (!lease.ok()) return lease.status();
  return std::unique_ptr<Registration>(new Registration(etcd, role, id, value, *lease, options));
}

absl::StatusOr<std::unique_ptr<Registration>> Registration::JoinFreeId(
    EtcdClient* etcd, const std::string& role, int limit, const std::string& value,
    const RegistrationOptions& options) {
  if (absl::Status s = options.Validate(); !s.ok()) return s;
  for (int id = 0; id < limit; ++id) {
    absl::StatusOr<int64_t> lease =
        Claim(etcd, MemberKey(options.job, role, id), value, options.ttl);
    if (lease.status().code() == absl::StatusCode::kAlreadyExists) continue;
    if (!lease.ok()) return lease.status();
    return std::unique_ptr<Registration>(new Registration(etcd, role, id, value, *lease, options));
  }
  return absl::ResourceExhaustedError(absl::StrCat("every one of the ", limit, " ", role,
                                                   " ids of job ", options.job,
                                                   " is held by a live member"));
}

namespace {

std::string WorkerValue() {
  char host[256] = {0};
  gethostname(host, sizeof(host) - 1);
  return absl::StrCat(host, " pid ", getpid());
}

}  // namespace

absl::StatusOr<std::unique_ptr<Registration>> JoinAsWorker(EtcdClient* etcd, int id,
                                                           int num_workers,
                                                           const RegistrationOptions& options,
                                                           bool joining) {
  const std::string value = absl::StrCat(WorkerValue(), joining ? kJoiningSuffix : "");
  if (id >= 0) return Registration::Join(etcd, "workers", id, value, options);
  return Registration::JoinFreeId(etcd, "workers", num_workers, value, options);
}

Registration::Registration(EtcdClient* etcd, std::string role, int id, std::string value,
                           int64_t lease, const RegistrationOptions& options)
    : etcd_(etcd),
      role_(std::move(role)),
      id_(id),
      key_(MemberKey(options.job, role_, id)),
      options_(options),
      value_(std::move(value)),
      lease_(lease) {
  thread_ = std::thread([this] { Renew(); });
}

Registration::~Registration() { Leave(); }

void Registration::Leave() {
  int64_t lease;
  {
    absl::MutexLock l(&mu_);
    if (stopping_) return;
    stopping_ = true;
    lease = lease_;
  }
  if (thread_.joinable()) thread_.join();
  if (absl::Status s = etcd_->RevokeLease(lease); !s.ok()) {
    Log(absl::StrCat(key_, ": could not leave at once (", s.message(),
                     "); the key goes when its lease expires"));
  }
}

bool Registration::renewing() const {
  absl::MutexLock l(&mu_);
  return renewing_;
}

absl::Status MarkWorkerReady(Registration* registration) {
  return registration->SetValue(WorkerValue());
}

absl::Status MarkWorkerWaiting(Registration* registration) {
  return registration->SetValue(absl::StrCat(WorkerValue(), kWaitingSuffix));
}

bool WorkerReady(const std::string& value) {
  return !absl::EndsWith(value, kJoiningSuffix) && !absl::EndsWith(value, kWaitingSuffix);
}

bool WorkerLoaded(const std::string& value) { return !absl::EndsWith(value, kJoiningSuffix); }

absl::Status Registration::SetValue(const std::string& value) {
  int64_t lease;
  {
    absl::MutexLock l(&mu_);
    value_ = value;
    lease = lease_;
  }
  return etcd_->Put(key_, value, lease);
}

void Registration::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void Registration::Renew() {
  const absl::Duration period = options_.ttl / 3;
  bool failing = false;
  absl::MutexLock l(&mu_);
  while (true) {
    // Wakes at once when Leave() sets stopping_.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), period);
    if (stopping_) return;
    const int64_t lease = lease_;
    const std::string value = value_;
    mu_.Unlock();
    absl::Status s = etcd_->KeepAlive(lease);
    int64_t renewed = lease;
    if (s.code() == absl::StatusCode::kNotFound) {
      // etcd dropped the lease (it expired while etcd was out of reach, or
      // etcd restarted without its data): register again.
      absl::StatusOr<int64_t> again = Claim(etcd_, key_, value, options_.ttl);
      if (again.ok()) {
        Log(absl::StrCat(key_, ": the lease had ended; registered again"));
        if (options_.on_registered_again) options_.on_registered_again();
        renewed = *again;
      }
      s = again.status();
    }
    if (!s.ok() && !failing) {
      Log(absl::StrCat(key_, ": cannot renew the registration: ", s.message(),
                       " (still trying every ", absl::FormatDuration(period), ")"));
    } else if (s.ok() && failing) {
      Log(absl::StrCat(key_, ": registration renewed again"));
    }
    failing = !s.ok();
    mu_.Lock();
    lease_ = renewed;
    renewing_ = s.ok();
  }
}

}  // namespace ps
