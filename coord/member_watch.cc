#include "coord/member_watch.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coord/registration.h"

namespace ps {
std::unique_ptr<MemberWatch> MemberWatch::Start(
    EtcdClient* etcd, const MemberWatchOptions& options,
    std::function<void(const WatchedMembers&)> on_change) {
  return std::unique_ptr<MemberWatch>(new MemberWatch(etcd, options, std::move(on_change)));
}

MemberWatch::MemberWatch(EtcdClient* etcd, const MemberWatchOptions& options,
                         std::function<void(const WatchedMembers&)> on_change)
    : etcd_(etcd),
      options_(options),
      prefix_(RolePrefix(options.job, options.role)),
      on_change_(std::move(on_change)),
      thread_([this] { Run(); }) {}

MemberWatch::~MemberWatch() { Stop(); }

void MemberWatch::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

bool MemberWatch::Sleep(absl::Duration d) {
  absl::MutexLock l(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
  return !stopping_;
}

bool MemberWatch::watching() const {
  absl::MutexLock l(&mu_);
  return watching_;
}

void MemberWatch::SetWatching(bool on) {
  absl::MutexLock l(&mu_);
  watching_ = on;
}

bool MemberWatch::Counts(const std::string& value) const {
  return !options_.counts || options_.counts(value);
}

void MemberWatch::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void MemberWatch::Run() {
  const std::string what = absl::StrCat("the ", options_.role, " of job ", options_.job);
  int64_t last_revision = 0;  // the newest revision seen
  bool broken = false;        // since the last failure was logged
  std::set<int> ids, held;    // the members that count, and the others
  auto report = [&] {
    on_change_(WatchedMembers{std::vector<int>(ids.begin(), ids.end()),
                              std::vector<int>(held.begin(), held.end())});
  };
  auto set = [&](int id, bool put, const std::string& value) {
    ids.erase(id);
    held.erase(id);
    if (put) (Counts(value) ? ids : held).insert(id);
  };
  while (true) {
    int64_t revision = 0;
    absl::StatusOr<std::vector<EtcdClient::KeyValue>> kvs = etcd_->List(prefix_, &revision);
    if (kvs.ok() && revision < last_revision) {
      Log(absl::StrCat("etcd came back without its data (revision ", revision, " < ", last_revision,
                       "): listing ", what, " in ", absl::FormatDuration(options_.ttl),
                       ", once they have registered again"));
      last_revision = 0;
      if (!Sleep(options_.ttl)) return;
      continue;
    }
    absl::Status s = kvs.status();
    if (s.ok()) {
      if (broken) Log(absl::StrCat("etcd answers again: watching ", what));
      broken = false;
      ids.clear();
      held.clear();
      for (const EtcdClient::KeyValue& kv : *kvs) {
        int id;
        if (MemberIdOfKey(kv.key, prefix_, &id)) set(id, true, kv.value);
      }
      last_revision = revision;
      report();
      SetWatching(true);
      s = etcd_->Watch(prefix_, revision + 1, &canceller_,
                       [&](const std::vector<EtcdClient::WatchEvent>& events) {
                         for (const EtcdClient::WatchEvent& e : events) {
                           last_revision = std::max(last_revision, e.kv.mod_revision);
                           int id;
                           if (MemberIdOfKey(e.kv.key, prefix_, &id)) {
                             set(id, e.put, e.kv.value);
                           }
                         }
                         report();
                       });
    }
    if (canceller_.cancelled()) return;
    SetWatching(false);
    if (!broken) {
      Log(absl::StrCat("cannot watch ", what, " in etcd: ", s.message(), "; keeping the last set [",
                       absl::StrJoin(ids, ", "), "] and trying again every ",
                       absl::FormatDuration(options_.retry)));
      broken = true;
    }
    if (!Sleep(options_.retry)) return;
  }
}

}  // namespace ps
