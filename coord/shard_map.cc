#include "coord/shard_map.h"

#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "coord/registration.h"

namespace ps {

std::string ShardMap::Format() const {
  std::string out = absl::StrCat("version ", version, "\nshards ", servers.size(), "\n");
  for (size_t i = 0; i < servers.size(); ++i) {
    if (!servers[i].empty()) absl::StrAppend(&out, i, " ", servers[i], "\n");
  }
  return out;
}

bool ShardMap::complete() const { return !servers.empty() && Missing().empty(); }

std::string ShardMap::Missing() const {
  std::vector<size_t> missing;
  for (size_t i = 0; i < servers.size(); ++i) {
    if (servers[i].empty()) missing.push_back(i);
  }
  return absl::StrJoin(missing, ", ");
}

absl::StatusOr<ShardMap> ParseShardMap(const std::string& text) {
  auto bad = [&](const std::string& why) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard map \"", absl::CEscape(text), "\": ", why,
                     " (want \"version V\\nshards S\\n\" and a line \"SHARD ADDRESS\" per shard)"));
  };
  ShardMap m;
  int64_t shards = -1;
  for (absl::string_view line : absl::StrSplit(text, '\n', absl::SkipEmpty())) {
    std::pair<std::string, std::string> kv = absl::StrSplit(line, absl::MaxSplits(' ', 1));
    int64_t n = 0;
    if (kv.first == "version") {
      if (!absl::SimpleAtoi(kv.second, &m.version) || m.version < 1) return bad("bad version");
    } else if (kv.first == "shards") {
      if (shards >= 1) return bad("two shard counts");
      if (!absl::SimpleAtoi(kv.second, &shards) || shards < 1 || shards > 1 << 16) {
        return bad("bad shard count");
      }
      m.servers.assign(static_cast<size_t>(shards), "");
    } else if (absl::SimpleAtoi(kv.first, &n) && shards >= 1) {
      if (n < 0 || n >= shards || kv.second.empty() || !m.servers[n].empty()) {
        return bad(absl::StrCat("bad line for shard ", n));
      }
      m.servers[n] = kv.second;
    } else {
      return bad(absl::StrCat("unexpected line \"", absl::CEscape(line), "\""));
    }
  }
  if (m.version < 1 || shards < 1) return bad("no version or shard count");
  return m;
}

absl::StatusOr<std::optional<ShardMap>> WithServer(const ShardMap& current, int shard,
                                                   int num_shards, const std::string& address) {
  if (num_shards < 1 || shard < 0 || shard >= num_shards) {
    return absl::InvalidArgumentError(
        absl::StrCat("shard map: shard ", shard, " is not one of ", num_shards));
  }
  if (address.empty() || address.find_first_of("\r\n") != std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat("shard map: server address \"",
                                                   absl::CEscape(address), "\" for shard ", shard,
                                                   " is empty or holds a line break"));
  }
  ShardMap next = current;
  if (next.servers.size() != static_cast<size_t>(num_shards)) {
    next.servers.assign(static_cast<size_t>(num_shards), "");
  } else if (next.servers[shard] == address) {
    return std::optional<ShardMap>();
  }
  next.servers[shard] = address;
  next.version = current.version + 1;
  return std::optional<ShardMap>(std::move(next));
}

std::string ShardMapKey(const std::string& job) {
  return absl::StrCat(JobPrefix(job), "shard_map");
}

namespace {

// The record stored at `key` (none: an empty map), its errors naming the key.
absl::StatusOr<ShardMap> ParseRecord(const std::string& key,
                                     const std::optional<std::string>& text) {
  if (!text.has_value()) return ShardMap();
  absl::StatusOr<ShardMap> m = ParseShardMap(*text);
  if (!m.ok()) return absl::InvalidArgumentError(absl::StrCat(key, ": ", m.status().message()));
  return m;
}

}  // namespace

absl::StatusOr<ShardMap> ReadShardMap(EtcdClient* etcd, const std::string& job) {
  const std::string key = ShardMapKey(job);
  ASSIGN_OR_RETURN(const std::optional<EtcdClient::KeyValue> kv, etcd->Get(key));
  return ParseRecord(key, kv.has_value() ? std::optional<std::string>(kv->value) : std::nullopt);
}

absl::StatusOr<ShardMap> PublishShardServer(EtcdClient* etcd, const std::string& job, int shard,
                                            int num_shards, const std::string& address) {
  const std::string key = ShardMapKey(job);
  const auto change =
      [&](const std::optional<std::string>& now) -> absl::StatusOr<std::optional<std::string>> {
    ASSIGN_OR_RETURN(const ShardMap current, ParseRecord(key, now));
    ASSIGN_OR_RETURN(const std::optional<ShardMap> next,
                     WithServer(current, shard, num_shards, address));
    if (!next.has_value()) return std::optional<std::string>();
    return std::optional<std::string>(next->Format());
  };
  ASSIGN_OR_RETURN(const std::optional<std::string> stored, etcd->Update(key, change));
  return ParseRecord(key, stored);
}

absl::StatusOr<ShardMap> ServersOfJob(EtcdClient* etcd, const std::string& job) {
  absl::StatusOr<ShardMap> m = ReadShardMap(etcd, job);
  if (!m.ok()) return m.status();
  if (m->version == 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        "no server of job ", job, " has published itself in etcd ", etcd->endpoint(), " (",
        ShardMapKey(job),
        "): start ps_server with the same --coordinator and --job, or name the servers"));
  }
  if (!m->complete()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job, "'s shard map in etcd ", etcd->endpoint(), " (version ",
                     m->version, ") has no server for shard(s) ", m->Missing(), " of ",
                     m->servers.size(), ": start them, or name the servers with --servers"));
  }
  // The map's servers that are not live (their keys gone, or another
  // address's): dead, or restarting, maybe elsewhere.
  absl::StatusOr<std::vector<Member>> live = ListMembers(etcd, job);
  if (!live.ok()) return live.status();
  std::vector<bool> up(m->servers.size(), false);
  for (const Member& member : *live) {
    if (member.role == "servers" && member.id >= 0 && static_cast<size_t>(member.id) < up.size() &&
        member.value == m->servers[member.id]) {
      up[member.id] = true;
    }
  }
  std::vector<std::string> down;
  for (size_t i = 0; i < up.size(); ++i) {
    if (!up[i]) down.push_back(absl::StrCat(i, " (", m->servers[i], ")"));
  }
  if (down.size() == up.size()) {
    return absl::FailedPreconditionError(
        absl::StrCat("no server of job ", job, " is registered in etcd ", etcd->endpoint(),
                     " (the shard map, version ", m->version,
                     ", names servers that are gone): start them, or name the servers"));
  }
  if (!down.empty()) {
    return absl::FailedPreconditionError(
        absl::StrCat("job ", job, ": the server of shard(s) ", absl::StrJoin(down, ", "),
                     " in the shard map (version ", m->version, ") is not registered in etcd ",
                     etcd->endpoint(), ": it is down or restarting; try again once it is back"));
  }
  return m;
}

}  // namespace ps
