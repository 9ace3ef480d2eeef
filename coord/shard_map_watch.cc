#include "coord/shard_map_watch.h"

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "coord/key_wait.h"

namespace ps {

std::unique_ptr<ShardMapWatch> ShardMapWatch::Start(
    EtcdClient* etcd, ShardMapWatchOptions options,
    std::function<void(const ShardMap&)> on_change) {
  std::unique_ptr<ShardMapWatch> w(
      new ShardMapWatch(etcd, std::move(options), std::move(on_change)));
  w->thread_ = std::thread([p = w.get()] { p->Run(); });
  return w;
}

ShardMapWatch::ShardMapWatch(EtcdClient* etcd, ShardMapWatchOptions options,
                             std::function<void(const ShardMap&)> on_change)
    : etcd_(etcd), options_(std::move(options)), on_change_(std::move(on_change)) {}

ShardMapWatch::~ShardMapWatch() { Stop(); }

void ShardMapWatch::Stop() {
  {
    absl::MutexLock l(&mu_);
    stopping_ = true;
  }
  if (thread_.joinable()) thread_.join();
}

int64_t ShardMapWatch::version() const {
  absl::MutexLock l(&mu_);
  return version_;
}

void ShardMapWatch::Run() {
  const std::string key = ShardMapKey(options_.job);
  KeyWaitInterrupt stop;
  stop.poll = options_.poll;
  stop.interrupted = [this] {
    absl::MutexLock l(&mu_);
    return stopping_ ? absl::CancelledError("stopped") : absl::OkStatus();
  };
  auto log = [this](const std::string& line) {
    if (options_.log) options_.log(line);
  };
  int64_t seen = 0;
  std::string skipped;  // the last record that did not parse, logged once
  bool failing = false;
  while (true) {
    ShardMap newer;
    absl::StatusOr<bool> found = WaitForKeys(
        etcd_, key,
        [&](const KeyMap& keys) {
          auto it = keys.find(key);
          if (it == keys.end()) return false;
          absl::StatusOr<ShardMap> m = ParseShardMap(it->second);
          if (!m.ok()) {
            if (it->second != skipped) log(absl::StrCat(key, ": ", m.status().message()));
            skipped = it->second;
            return false;
          }
          if (m->version <= seen) return false;
          newer = *std::move(m);
          return true;
        },
        absl::Now() + absl::Seconds(30), stop);
    if (found.status().code() == absl::StatusCode::kCancelled) return;  // stopped
    if (!found.ok()) {
      if (!failing) {
        log(absl::StrCat("cannot watch the shard map ", key, ": ", found.status().message(),
                         " (keeping version ", seen, "; trying again every ",
                         absl::FormatDuration(options_.retry), ")"));
      }
      failing = true;
      absl::MutexLock l(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_), options_.retry)) return;
      continue;
    }
    if (failing) log(absl::StrCat("watching the shard map ", key, " again"));
    failing = false;
    if (!*found) continue;  // a slice with nothing newer
    seen = newer.version;
    on_change_(newer);
    absl::MutexLock l(&mu_);
    version_ = seen;
  }
}

}  // namespace ps
