#include "coord/member_watch.h"

#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "coord/registration.h"

namespace ps {

std::unique_ptr<MemberWatch> MemberWatch::Start(
    EtcdClient* etcd, const MemberWatchOptions& options,
    std::function<void(const WatchedMembers&)> on_change) {
  std::unique_ptr<MemberWatch> w(new MemberWatch());
  const std::string prefix = RolePrefix(options.job, options.role);
  // The ids that count, for the log line while the watch is broken (only
  // the watch's thread touches it).
  auto counted = std::make_shared<std::vector<int>>();
  PrefixWatchOptions po;
  po.prefix = prefix;
  po.what = absl::StrCat("the ", options.role, " of job ", options.job);
  po.ttl = options.ttl;
  po.retry = options.retry;
  po.log = options.log;
  po.kept = [counted] {
    return absl::StrCat("the last set [", absl::StrJoin(*counted, ", "), "]");
  };
  w->watch_ = PrefixWatch::Start(
      etcd, std::move(po),
      [prefix, counts = options.counts, counted,
       on_change = std::move(on_change)](const KeyMap& keys) {
        std::set<int> ids, held;
        for (const auto& [key, value] : keys) {
          int id;
          if (!MemberIdOfKey(key, prefix, &id)) continue;
          (!counts || counts(value) ? ids : held).insert(id);
        }
        counted->assign(ids.begin(), ids.end());
        on_change(WatchedMembers{*counted, std::vector<int>(held.begin(), held.end())});
      });
  return w;
}

MemberWatch::~MemberWatch() { Stop(); }

void MemberWatch::Stop() {
  if (watch_ != nullptr) watch_->Stop();
}

bool MemberWatch::watching() const { return watch_->watching(); }

}  // namespace ps
