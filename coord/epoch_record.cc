#include "coord/epoch_record.h"

#include <algorithm>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "coord/registration.h"

namespace ps {

std::string EpochRecord::Format() const {
  return absl::StrCat("first_step=", first_step, " workers=", absl::StrJoin(workers, ","));
}

int EpochRecord::RankOf(int worker) const {
  const auto it = std::find(workers.begin(), workers.end(), worker);
  return it == workers.end() ? -1 : static_cast<int>(it - workers.begin());
}

absl::StatusOr<EpochRecord> ParseEpochRecord(int64_t epoch, const std::string& text) {
  const auto bad = [&] {
    return absl::InvalidArgumentError(absl::StrCat("epoch ", epoch, "'s record \"", text,
                                                   "\" is not \"first_step=S workers=0,1,...\""));
  };
  const std::vector<absl::string_view> parts = absl::StrSplit(text, ' ');
  if (parts.size() != 2) return bad();
  absl::string_view first = parts[0], workers = parts[1];
  EpochRecord r;
  r.epoch = epoch;
  if (!absl::ConsumePrefix(&first, "first_step=") || !absl::SimpleAtoi(first, &r.first_step) ||
      r.first_step < 0 || !absl::ConsumePrefix(&workers, "workers=") || workers.empty()) {
    return bad();
  }
  for (absl::string_view w : absl::StrSplit(workers, ',')) {
    int id = 0;
    if (!absl::SimpleAtoi(w, &id) || id < 0 || (!r.workers.empty() && id <= r.workers.back())) {
      return bad();
    }
    r.workers.push_back(id);
  }
  return r;
}

std::string EpochsPrefix(const std::string& job) { return absl::StrCat(JobPrefix(job), "epochs/"); }

std::string EpochKey(const std::string& job, int64_t epoch) {
  return absl::StrFormat("%s%010d", EpochsPrefix(job), epoch);
}

absl::StatusOr<EpochRecord> ClaimEpoch(EtcdClient* etcd, const std::string& job,
                                       const EpochRecord& proposed) {
  const std::string key = EpochKey(job, proposed.epoch);
  ASSIGN_OR_RETURN(const bool created, etcd->PutIfAbsent(key, proposed.Format(), /*lease=*/0));
  if (created) return proposed;
  ASSIGN_OR_RETURN(const std::optional<EtcdClient::KeyValue> kv, etcd->Get(key));
  if (kv.has_value()) return ParseEpochRecord(proposed.epoch, kv->value);
  // Deleted between the two calls (the servers cleared the job's records).
  return absl::UnavailableError(absl::StrCat(key, " went while it was read; try again"));
}

absl::StatusOr<std::vector<EpochRecord>> ListEpochs(EtcdClient* etcd, const std::string& job) {
  const std::string prefix = EpochsPrefix(job);
  ASSIGN_OR_RETURN(const std::vector<EtcdClient::KeyValue> kvs, etcd->List(prefix));
  std::vector<EpochRecord> records;
  for (const EtcdClient::KeyValue& kv : kvs) {
    int64_t epoch = 0;
    if (!absl::SimpleAtoi(absl::string_view(kv.key).substr(prefix.size()), &epoch)) continue;
    ASSIGN_OR_RETURN(EpochRecord r, ParseEpochRecord(epoch, kv.value));
    records.push_back(std::move(r));
  }
  return records;
}

absl::Status ClearEpochs(EtcdClient* etcd, const std::string& job) {
  return etcd->DeletePrefix(EpochsPrefix(job));
}

}  // namespace ps
