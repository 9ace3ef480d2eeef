#include "coord/job_settings.h"

#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "coord/registration.h"

namespace ps {

std::string JobSettings::Format() const {
  return absl::StrCat("num_shards=", num_shards, " num_workers=", num_workers, " mode=", mode);
}

absl::StatusOr<JobSettings> ParseJobSettings(const std::string& text) {
  JobSettings s;
  bool shards = false, workers = false, mode = false;
  for (absl::string_view field : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(field, absl::MaxSplits('=', 1));
    if (kv.first == "num_shards") {
      shards = absl::SimpleAtoi(kv.second, &s.num_shards) && s.num_shards >= 1;
    } else if (kv.first == "num_workers") {
      workers = absl::SimpleAtoi(kv.second, &s.num_workers) && s.num_workers >= 1;
    } else if (kv.first == "mode") {
      s.mode = kv.second;
      mode = !s.mode.empty();
    }
  }
  if (!shards || !workers || !mode) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job settings \"", text, "\": want \"num_shards=S num_workers=W mode=M\", S, W >= 1"));
  }
  return s;
}

std::string JobSettingsKey(const std::string& job) {
  return absl::StrCat(JobPrefix(job), "settings");
}

absl::Status PublishJobSettings(EtcdClient* etcd, const std::string& job,
                                const JobSettings& settings) {
  const std::string key = JobSettingsKey(job);
  const std::string value = settings.Format();
  // Another job's settings are replaced only while none of its servers runs.
  const auto change =
      [&](const std::optional<std::string>& now) -> absl::StatusOr<std::optional<std::string>> {
    if (now == value) return std::optional<std::string>();
    if (now.has_value()) {
      ASSIGN_OR_RETURN(const std::vector<EtcdClient::KeyValue> servers,
                       etcd->List(RolePrefix(job, "servers")));
      if (!servers.empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", job, " runs with ", *now, " (etcd ", key, ", ", servers.size(),
                         " server(s) registered), but this server has ", value,
                         ": start it with the job's flags, or under another --job"));
      }
    }
    return std::optional<std::string>(value);
  };
  return etcd->Update(key, change, /*tries=*/5).status();
}

absl::StatusOr<JobSettings> ReadJobSettings(EtcdClient* etcd, const std::string& job) {
  const std::string key = JobSettingsKey(job);
  ASSIGN_OR_RETURN(const std::optional<EtcdClient::KeyValue> found, etcd->Get(key));
  if (!found.has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job, " has no settings in etcd ", etcd->endpoint(), " (", key,
                     "): start its ps_server with the same --coordinator and --job first, or pass "
                     "the worker count"));
  }
  return ParseJobSettings(found->value);
}

}  // namespace ps
