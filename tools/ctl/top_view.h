// TopView: the table that `ps_ctl top` shows, made from successive polls of
// every shard's GetStatus (proto/ps.proto StatusResponse).
//
// Per shard: its version, steps/s, live and dropped workers (without leases,
// in async mode or with --worker_timeout=0, every worker seen is live),
// waiting calls,
// push and pull latency p50 and p99, and tensor bytes/s received and sent.
// Per worker: its state, its step and how far it lags behind the newest
// worker. Rates (steps/s, bytes/s) and latency quantiles are over the time
// between the last two polls of a shard that answered both (same server
// incarnation); on the first poll, or after a restart, the quantiles are
// over the server's whole life and the rates are "-". A shard that gave no
// reply is a row and a line with its error, never a failure: DOWN (it did
// not answer: UNAVAILABLE, DEADLINE_EXCEEDED), DENIED (it refused the
// caller: PERMISSION_DENIED, UNAUTHENTICATED) or ERROR (anything else).
//
// Latency quantiles come from the servers' fixed buckets (server/core/stats.h:
// 50us, 100us, 250us, 500us, 1ms, ... 100s, as each reply lists them): a
// quantile is the upper bound of the bucket it falls in, not interpolated,
// so "2.5ms" reads "at most 2.5 ms" ("+Inf" for the last, open bucket).
//
// Pure: no clock, no thread, no I/O. The poll times are passed in. Not
// thread-safe; a plain value.
#ifndef PS_TOOLS_CTL_TOP_VIEW_H_
#define PS_TOOLS_CTL_TOP_VIEW_H_

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "proto/ps.pb.h"

namespace ps {

// One poll of every shard, in the order of --servers.
struct TopPoll {
  absl::Time time;
  std::vector<std::string> servers;
  // One per server: its reply, or why it gave none.
  std::vector<absl::StatusOr<v1::StatusResponse>> replies;
};

// The q-quantile (0 < q <= 1) of the calls counted in `counts` (per bucket;
// one more than `bounds_micros`, the last the open bucket): the upper bound
// of the bucket holding it, in microseconds; INT64_MAX for the open bucket;
// nullopt when no call was counted or the sizes do not fit.
std::optional<int64_t> BucketQuantileMicros(const std::vector<int64_t>& bounds_micros,
                                            const std::vector<int64_t>& counts, double q);

class TopView {
 public:
  // Records a poll; the one before it is the base of the rates.
  void Add(TopPoll poll);

  // The table for the latest poll: a header line, one line per shard, a
  // line per shard that is down, then one line per worker. Empty before the
  // first Add.
  std::vector<std::string> Render() const;

 private:
  std::optional<TopPoll> prev_;
  std::optional<TopPoll> cur_;
};

}  // namespace ps

#endif  // PS_TOOLS_CTL_TOP_VIEW_H_
