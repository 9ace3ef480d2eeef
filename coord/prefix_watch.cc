#include "coord/prefix_watch.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

namespace ps {

std::unique_ptr<PrefixWatch> PrefixWatch::Start(EtcdClient* etcd, PrefixWatchOptions options,
                                                std::function<void(const KeyMap&)> on_change) {
  return std::unique_ptr<PrefixWatch>(
      new PrefixWatch(etcd, std::move(options), std::move(on_change)));
}

PrefixWatch::PrefixWatch(EtcdClient* etcd, PrefixWatchOptions options,
                         std::function<void(const KeyMap&)> on_change)
    : etcd_(etcd),
      options_(std::move(options)),
      on_change_(std::move(on_change)),
      thread_([this] { Run(); }) {}

PrefixWatch::~PrefixWatch() { Stop(); }

void PrefixWatch::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  canceller_.Cancel();
  if (thread_.joinable()) thread_.join();
}

bool PrefixWatch::Sleep(absl::Duration d) {
  absl::MutexLock l(&mu_);
  auto stopping = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return stopping_; };
  mu_.AwaitWithTimeout(absl::Condition(&stopping), d);
  return !stopping_;
}

bool PrefixWatch::watching() const {
  absl::MutexLock l(&mu_);
  return watching_;
}

void PrefixWatch::SetWatching(bool on) {
  absl::MutexLock l(&mu_);
  watching_ = on;
}

void PrefixWatch::Log(const std::string& line) const {
  if (options_.log) options_.log(line);
}

void PrefixWatch::Run() {
  const std::string& what = options_.what;
  int64_t last_revision = 0;  // the newest revision seen
  bool broken = false;        // since the last failure was logged
  KeyMap keys;
  while (true) {
    int64_t revision = 0;
    absl::StatusOr<std::vector<EtcdClient::KeyValue>> kvs = etcd_->List(options_.prefix, &revision);
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
      keys.clear();
      for (EtcdClient::KeyValue& kv : *kvs) keys[kv.key] = std::move(kv.value);
      last_revision = revision;
      on_change_(keys);
      SetWatching(true);
      s = etcd_->Watch(options_.prefix, revision + 1, &canceller_,
                       [&](const std::vector<EtcdClient::WatchEvent>& events) {
                         for (const EtcdClient::WatchEvent& e : events) {
                           last_revision = std::max(last_revision, e.kv.mod_revision);
                           if (e.put) {
                             keys[e.kv.key] = e.kv.value;
                           } else {
                             keys.erase(e.kv.key);
                           }
                         }
                         on_change_(keys);
                       });
    }
    if (canceller_.cancelled()) return;
    SetWatching(false);
    if (!broken) {
      Log(absl::StrCat("cannot watch ", what, " in etcd: ", s.message(), "; keeping ",
                       options_.kept ? options_.kept() : std::string("the last keys"),
                       " and trying again every ", absl::FormatDuration(options_.retry)));
      broken = true;
    }
    if (!Sleep(options_.retry)) return;
  }
}

}  // namespace ps
