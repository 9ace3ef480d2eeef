// JoinJob: with --coordinator (coord/, docs/elastic.md), ps_worker's place
// in its job's membership in etcd, taken before it connects to the servers.
//
// It registers the worker as workers/<id> of the job, the value "HOST pid
// PID joining" (until ps_worker has loaded its data and calls
// MarkWorkerReady: sync servers do not wait for it before), under a lease
// renewed while it trains (coord/registration.h): with
// --worker_id that id (ALREADY_EXISTS naming the holder when a live worker
// has it), without it the lowest id below --num_workers that no live
// worker holds (RESOURCE_EXHAUSTED when all are). Without --num_workers
// the worker count is the job's (coord/job_settings.h: what its servers
// wrote; FAILED_PRECONDITION when none has). The id and count are then set
// wherever `config` carries them. Without --servers it takes the servers
// from the job's shard map (coord/shard_map.h: FAILED_PRECONDITION naming
// the shards without a live server), and sets the client's find_servers to
// read it again, so that recovery follows a server that moved.
//
// Without a coordinator it does nothing. The result holds the
// registration and the etcd client that find_servers borrows: it must
// outlive the PsClient; destroying it leaves the job at once.
#ifndef PS_WORKER_JOB_H_
#define PS_WORKER_JOB_H_

#include <memory>

#include "absl/status/statusor.h"
#include "common/data_share.h"
#include "coord/etcd_client.h"
#include "coord/registration.h"
#include "worker/worker_flags.h"

namespace ps {

struct JobMembership {
  std::unique_ptr<EtcdClient> etcd;            // null without a coordinator
  std::unique_ptr<Registration> registration;  // destroyed first: leaves
};

absl::StatusOr<JobMembership> JoinJob(WorkerConfig* config);

// Once the worker has loaded its data: with a coordinator, marks its key
// waiting (for an epoch to take a share of) and returns the shares by the
// job's membership (coord/elastic_shares.h; waiting at each epoch's start
// for its workers unless the job's mode is async); without one, null
// (the run loop's FixedShares). Errors: etcd's.
absl::StatusOr<std::unique_ptr<DataShares>> JobDataShares(const WorkerConfig& config,
                                                          const JobMembership& job);

}  // namespace ps

#endif  // PS_WORKER_JOB_H_
