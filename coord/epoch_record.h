// EpochRecord: which workers share one epoch of a job's data, a record in
// etcd per epoch (docs/elastic.md, "Data shares"):
//
//   /ps/<job>/epochs/<epoch, 10 digits>   "first_step=S workers=0,1,3"
//
// The first ps_worker to reach an epoch creates its record (ClaimEpoch:
// create-if-absent, so racing workers end up with one record); nothing
// changes it after. The epoch's examples are cut into as many shares as it
// lists workers, and the worker listed k-th takes share k, from step S on
// (coord/elastic_shares.h). The servers delete the records when a job
// starts from step 0 (ClearEpochs): they are one run's history, and a run
// that resumes from a checkpoint keeps them.
//
// Stateless functions; thread-safe as EtcdClient is.
#ifndef PS_COORD_EPOCH_RECORD_H_
#define PS_COORD_EPOCH_RECORD_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "coord/etcd_client.h"

namespace ps {

struct EpochRecord {
  int64_t epoch = 0;
  int64_t first_step = 0;    // the step the epoch starts at
  std::vector<int> workers;  // ascending worker ids, at least one

  // "first_step=S workers=0,1,3".
  std::string Format() const;
  // Where `worker` is in `workers`; -1 when it is not listed.
  int RankOf(int worker) const;
  bool operator==(const EpochRecord& o) const {
    return epoch == o.epoch && first_step == o.first_step && workers == o.workers;
  }
};

// INVALID_ARGUMENT naming the text unless it is Format's, with
// first_step >= 0 and ascending, distinct worker ids >= 0.
absl::StatusOr<EpochRecord> ParseEpochRecord(int64_t epoch, const std::string& text);

// The records' prefix, and epoch `epoch`'s key (10 digits, so that key
// order is epoch order).
std::string EpochsPrefix(const std::string& job);
std::string EpochKey(const std::string& job, int64_t epoch);

// Creates `proposed`'s record unless its epoch has one; the record etcd
// holds after the call (proposed, or the one another worker made first).
absl::StatusOr<EpochRecord> ClaimEpoch(EtcdClient* etcd, const std::string& job,
                                       const EpochRecord& proposed);

// Every record of `job`, by epoch (INVALID_ARGUMENT for one that does not
// parse).
absl::StatusOr<std::vector<EpochRecord>> ListEpochs(EtcdClient* etcd, const std::string& job);

// Deletes every record of `job`.
absl::Status ClearEpochs(EtcdClient* etcd, const std::string& job);

}  // namespace ps

#endif  // PS_COORD_EPOCH_RECORD_H_
