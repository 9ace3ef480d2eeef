// PsClient's recovery from faults (client/ps_client.h, ClientOptions::
// retry_timeout): retrying a failed operation, registering again and
// restoring shards that came back behind, as client/internal/recovery.h
// plans it; and, after a sync Init, rolling shards back to a common
// version. PsClient::Cancel stops all of it (the canceller in ClientState).
#include <functional>
#include <optional>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "client/internal/ps_client_rep.h"
#include "client/internal/recovery.h"
#include "client/internal/registration.h"
#include "client/ps_client.h"

namespace ps {
namespace {

// The PendingOp of an operation that is retried (PsClient::Retry) when its
// first try fails: Wait() waits for the first try, then runs `retry` on its
// status. Destroying it before Wait() cancels the first try.
class RetryingOp final : public PendingOp {
 public:
  using Retry = std::function<absl::Status(absl::Status)>;
  RetryingOp(std::unique_ptr<PendingOp> first, Retry retry)
      : first_(std::move(first)), retry_(std::move(retry)) {}

  absl::Status Wait() override {
    absl::Status status = first_->Wait();
    first_.reset();
    return retry_(std::move(status));
  }

 private:
  std::unique_ptr<PendingOp> first_;
  const Retry retry_;
};

}  // namespace

std::unique_ptr<PendingOp> PsClient::Retried(const char* what,
                                             std::function<std::unique_ptr<PendingOp>()> start) {
  rep_->StartOp();
  std::unique_ptr<PendingOp> first = start();
  return std::make_unique<RetryingOp>(
      std::move(first), [this, what, start = std::move(start)](absl::Status status) {
        return Retry(what, std::move(status), [&start] { return start()->Wait(); });
      });
}

absl::Status PsClient::Retry(const char* what, absl::Status status,
                             const std::function<absl::Status()>& attempt) {
  const ClientOptions& o = rep_->state.options;
  status = rep_->Outcome(what, std::move(status));
  if (status.ok() || o.retry_timeout <= absl::ZeroDuration() || !MayRetry(status.code()) ||
      rep_->state.canceller.cancelled()) {
    return status;
  }
  const absl::Time start = absl::Now();
  const absl::Time deadline = start + o.retry_timeout;
  for (int tries = 1;; ++tries) {
    if (tries == 1 || tries % 10 == 0) {
      Log(
          absl::StrFormat("worker %d: %s failed (a shard unavailable or restarted?), try %d, "
                          "retrying for up to %.1fs more: %s",
                          o.worker_id, what, tries, absl::ToDoubleSeconds(deadline - absl::Now()),
                          status.ToString()));
    }
    bool restarted = false;
    absl::Status recovered = Recover(deadline, &restarted);
    if (rep_->state.canceller.cancelled()) return rep_->Outcome(what, status);
    if (!recovered.ok()) {
      return absl::Status(
          status.code(),
          absl::StrCat(status.message(), "; gave up after retrying for ",
                       absl::StrFormat("%.1fs", absl::ToDoubleSeconds(absl::Now() - start)),
                       " (--retry_timeout): ", recovered.message()));
    }
    if (!RetryAfterRecovery(status.code(), restarted)) return status;
    rep_->state.shard_version = rep_->op_versions;
    rep_->state.seq = rep_->op_seq;
    ++rep_->retries;
    status = rep_->Outcome(what, attempt());
    if (status.ok()) {
      ++rep_->recoveries;
      Log(absl::StrFormat("worker %d: %s went through after %.1fs (%d retries)", o.worker_id, what,
                          absl::ToDoubleSeconds(absl::Now() - start), tries));
      return status;
    }
    if (!MayRetry(status.code()) || absl::Now() >= deadline || rep_->state.canceller.cancelled()) {
      return status;
    }
  }
}

absl::Status PsClient::Recover(absl::Time deadline, bool* restarted) {
  const ClientState& state = rep_->state;
  const ClientOptions& o = state.options;
  absl::Duration backoff = kFirstBackoff;
  while (true) {
    // A call routed by an older map is retried on the new one as after a
    // restart (the server refused it without acting: rpc/route.h).
    if (FollowMovedServers()) *restarted = true;
    std::vector<v1::RegisterResponse> replies;
    absl::Status st = rep_->control->RegisterAll(RegisterTimeout(deadline, absl::Now()),
                                                 /*wait_for_ready=*/true, &replies);
    std::vector<ShardRegistration> registered;
    std::vector<ShardRecovery> plan;
    if (st.ok()) {
      registered = ToShardRegistrations(replies);
      std::vector<KnownShard> known;
      for (int s = 0; s < num_shards(); ++s) {
        known.push_back({rep_->incarnation[s], !state.spec.empty() && !state.held[s].empty(),
                         state.held_version[s]});
      }
      plan = PlanRecovery(registered, known);
    }
    for (int s = 0; st.ok() && s < num_shards(); ++s) {
      const ShardRegistration& r = registered[s];
      if (plan[s].restarted) {
        *restarted = true;
        Log(
            absl::StrFormat("worker %d: shard %d (%s) restarted: now %s (was %s), %s; this "
                            "worker holds version %d",
                            o.worker_id, s, o.servers[s], IncarnationName(r.incarnation),
                            IncarnationName(rep_->incarnation[s]),
                            r.initialized ? absl::StrCat("at version ", r.version)
                                          : std::string("without parameters"),
                            state.held_version[s]));
        rep_->incarnation[s] = r.incarnation;
      }
      if (!plan[s].restore) continue;
      absl::StatusOr<v1::InitResponse> resp = rep_->control->Restore(s);
      st = resp.status();
      if (!st.ok()) continue;
      Log(absl::StrFormat(
          "worker %d: shard %d was at version %d; %s", o.worker_id, s, r.version,
          resp->created()
              ? absl::StrCat("restored it to version ", state.held_version[s],
                             " from this worker's copy")
              : absl::StrCat("another worker brought it to version ", resp->version(), " first")));
    }
    if (st.ok()) return st;
    if (absl::Now() + backoff >= deadline) return st;
    // PsClient::Cancel wakes it: Retry then gives up.
    if (!rep_->state.canceller.SleepUnlessCancelled(backoff)) return st;
    backoff = NextBackoff(backoff);
  }
}

bool PsClient::FollowMovedServers() {
  ClientOptions& o = rep_->state.options;
  if (!o.find_servers) return false;
  absl::StatusOr<ServersAt> now = o.find_servers();
  if (!now.ok()) return false;  // unknown for now
  if (now->servers.size() != o.servers.size()) return FollowReshard(*std::move(now));
  if (now->servers == o.servers) {
    return rep_->map_version->exchange(now->map_version) != now->map_version;
  }
  for (size_t s = 0; s < now->servers.size(); ++s) {
    if (now->servers[s] != o.servers[s]) {
      Log(absl::StrFormat(
          "worker %d: shard %d moved from %s to %s (the job's shard map, version %d)", o.worker_id,
          s, o.servers[s], now->servers[s], now->map_version));
    }
  }
  return SwitchServers(std::move(now->servers), now->map_version, "the moved servers", [](bool) {});
}

bool PsClient::SwitchServers(std::vector<std::string> servers, int64_t map_version,
                             absl::string_view what, const std::function<void(bool back)>& cut) {
  ClientOptions& o = rep_->state.options;
  std::vector<std::string> was = std::exchange(o.servers, std::move(servers));
  const int64_t was_version = rep_->map_version->exchange(map_version);
  cut(/*back=*/false);
  if (absl::Status opened = rep_->Open(); !opened.ok()) {
    Log(absl::StrFormat("worker %d: cannot connect to %s: %s", o.worker_id, what,
                        opened.ToString()));
    cut(/*back=*/true);  // as it was
    o.servers = std::move(was);
    rep_->map_version->store(was_version);
    rep_->Open().IgnoreError();  // they opened before
    return false;
  }
  return true;
}

bool PsClient::FollowReshard(ServersAt now) {
  ClientState& state = rep_->state;
  ClientOptions& o = state.options;
  const int to = static_cast<int>(now.servers.size());
  const auto refuse = [&](absl::string_view why) {
    Log(absl::StrFormat(
        "worker %d: the job's servers are now %d shards (%s), this client's %d: not followed, %s; "
        "staying with [%s]",
        o.worker_id, to, absl::StrJoin(now.servers, ","), o.servers.size(), why,
        absl::StrJoin(o.servers, ",")));
    return false;
  };
  if (!state.tables.empty()) {
    return refuse("its embedding tables' rows are grouped by the old count in calls in flight");
  }
  const auto one_value = [](const std::vector<int64_t>& v) {
    return std::adjacent_find(v.begin(), v.end(), std::not_equal_to<>()) == v.end();
  };
  if (!one_value(state.shard_version) || !one_value(state.held_version) ||
      !one_value(rep_->op_versions)) {
    return refuse("its shards are at different versions (restore on another count is sync's)");
  }
  // Everything by shard, cut for the new count: the layouts, the copy of
  // the slices (re-cut), the versions; the incarnations are unknown, so
  // that Register finds every shard restarted (and restores those behind).
  std::vector<std::shared_ptr<const SliceLayout>> layouts;
  for (int s = 0; s < to && !state.spec.empty(); ++s) {
    layouts.push_back(MakeSliceLayout(state.spec, to, s));
  }
  absl::StatusOr<std::vector<std::vector<float>>> held =
      RecutCopy(state.spec, state.layouts, state.held, layouts);
  if (!held.ok()) return refuse(held.status().message());
  held->resize(to);  // before Init: no layouts, no copy
  const auto first = [](const std::vector<int64_t>& v) { return v.empty() ? 0 : v.front(); };
  const int64_t held_at = first(state.held_version), pulled_at = first(state.shard_version),
                op_at = first(rep_->op_versions);
  const int from = num_shards();
  // Swaps the layouts and copy in (or back), and sizes the rest for the
  // new count (or the old).
  const auto cut = [&](bool back) {
    const int n = back ? from : to;
    std::swap(state.layouts, layouts);
    std::swap(state.held, *held);
    state.held_version.assign(n, held_at);
    state.shard_version.assign(n, pulled_at);
    rep_->op_versions.assign(n, op_at);
    state.reply.assign(n, ReplyInfo());
    rep_->incarnation.assign(n, Incarnation());
  };
  Log(absl::StrFormat(
      "worker %d: the job's servers are now %d shards (the shard map, version %d), were %d: "
      "following them at version %d, this client's copy re-cut",
      o.worker_id, to, now.map_version, from, held_at));
  return SwitchServers(std::move(now.servers), now.map_version, "the job's new servers", cut);
}

void PsClient::RollBackToCommonVersion(std::vector<int64_t> versions) {
  const ClientOptions& o = rep_->state.options;
  CommonVersionRollback rollback(std::move(versions));
  while (std::optional<CommonVersionRollback::Round> round = rollback.Next()) {
    for (int s : round->shards) {
      absl::StatusOr<v1::InitResponse> resp = rep_->control->RollBack(s, round->target);
      if (!resp.ok()) continue;  // refused: nothing to do
      if (resp->created()) {
        Log(absl::StrFormat(
            "worker %d: the shards restarted at versions [%s]; rolled shard %d "
            "back to its checkpoint of version %d, the newest they share",
            o.worker_id, absl::StrJoin(rollback.versions(), ", "), s, resp->version()));
      }
      rollback.Answered(s, resp->created(), resp->version());
    }
  }
}

}  // namespace ps
