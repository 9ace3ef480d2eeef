#include "coord/shard_map_watch.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ps {

std::unique_ptr<ShardMapWatch> ShardMapWatch::Start(
    EtcdClient* etcd, ShardMapWatchOptions options,
    std::function<void(const ShardMap&)> on_change) {
  std::unique_ptr<ShardMapWatch> w(new ShardMapWatch());
  const std::string key = ShardMapKey(options.job);
  PrefixWatchOptions po;
  po.prefix = key;
  po.what = absl::StrCat("the shard map ", key);
  po.ttl = options.ttl;
  po.retry = options.retry;
  po.log = options.log;
  po.kept = [seen = w->seen_] {
    absl::MutexLock l(&seen->mu);
    return absl::StrCat("version ", seen->version);
  };
  // The last record that did not parse, logged once (only the watch's
  // thread touches it).
  auto skipped = std::make_shared<std::string>();
  w->watch_ = PrefixWatch::Start(etcd, std::move(po),
                                 [key, log = options.log, seen = w->seen_, skipped,
                                  on_change = std::move(on_change)](const KeyMap& keys) {
                                   auto it = keys.find(key);  // the prefix also holds longer keys
                                   if (it == keys.end()) return;
                                   absl::StatusOr<ShardMap> m = ParseShardMap(it->second);
                                   if (!m.ok()) {
                                     if (it->second != *skipped && log)
                                       log(absl::StrCat(key, ": ", m.status().message()));
                                     *skipped = it->second;
                                     return;
                                   }
                                   {
                                     absl::MutexLock l(&seen->mu);
                                     if (m->version <= seen->version) return;
                                   }
                                   on_change(*m);
                                   absl::MutexLock l(&seen->mu);
                                   seen->version = m->version;
                                 });
  return w;
}

ShardMapWatch::~ShardMapWatch() { Stop(); }

void ShardMapWatch::Stop() {
  if (watch_ != nullptr) watch_->Stop();
}

int64_t ShardMapWatch::version() const {
  absl::MutexLock l(&seen_->mu);
  return seen_->version;
}

}  // namespace ps
