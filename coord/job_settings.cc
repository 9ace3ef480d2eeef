#include "coord/job_settings.h"

#include <optional>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
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

namespace {

// The record and its mod revision; nullopt when absent.
absl::StatusOr<std::optional<EtcdClient::KeyValue>> Get(EtcdClient* etcd, const std::string& key) {
  absl::StatusOr<std::vector<EtcdClient::KeyValue>> kvs = etcd->List(key);
  if (!kvs.ok()) return kvs.status();
  for (const EtcdClient::KeyValue& kv : *kvs) {
    if (kv.key == key) return std::optional<EtcdClient::KeyValue>(kv);
  }
  return std::optional<EtcdClient::KeyValue>();
}

}  // namespace

absl::Status PublishJobSettings(EtcdClient* etcd, const std::string& job,
                                const JobSettings& settings) {
  const std::string key = JobSettingsKey(job);
  const std::string value = settings.Format();
  // A compare-and-swap that loses to another server reads the record again.
  for (int attempt = 0; attempt < 5; ++attempt) {
    absl::StatusOr<std::optional<EtcdClient::KeyValue>> found = Get(etcd, key);
    if (!found.ok()) return found.status();
    if (found->has_value() && (*found)->value == value) return absl::OkStatus();
    if (found->has_value()) {
      absl::StatusOr<std::vector<EtcdClient::KeyValue>> servers =
          etcd->List(RolePrefix(job, "servers"));
      if (!servers.ok()) return servers.status();
      if (!servers->empty()) {
        return absl::FailedPreconditionError(
            absl::StrCat("job ", job, " runs with ", (*found)->value, " (etcd ", key, ", ",
                         servers->size(), " server(s) registered), but this server has ", value,
                         ": start it with the job's flags, or under another --job"));
      }
    }
    absl::StatusOr<bool> put =
        etcd->CompareAndPut(key, found->has_value() ? (*found)->mod_revision : 0, value);
    if (!put.ok()) return put.status();
    if (*put) return absl::OkStatus();
  }
  return absl::AbortedError(
      absl::StrCat("job ", job, ": the settings in etcd ", key, " kept changing; try again"));
}

absl::StatusOr<JobSettings> ReadJobSettings(EtcdClient* etcd, const std::string& job) {
  const std::string key = JobSettingsKey(job);
  absl::StatusOr<std::optional<EtcdClient::KeyValue>> found = Get(etcd, key);
  if (!found.ok()) return found.status();
  if (!found->has_value()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job, " has no settings in etcd ", etcd->endpoint(), " (", key,
                     "): start its ps_server with the same --coordinator and --job first, or pass "
                     "the worker count"));
  }
  return ParseJobSettings((*found)->value);
}

}  // namespace ps
