#include "server/checkpoint/checkpoint_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <initializer_list>
#include <map>
#include <sstream>
#include <system_error>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint.h"
#include "server/checkpoint/checkpoint_delta.h"

namespace ps {
namespace {

constexpr char kMagic[] = "PSCKPT01";
constexpr size_t kMagicBytes = 8;
constexpr size_t kHeaderBytes = kMagicBytes + 8 + 4;

absl::Status ErrnoStatus(absl::string_view what, const std::string& path) {
  const int e = errno;
  std::string message = absl::StrCat(what, " ", path, ": ", std::strerror(e));
  if (e == ENOENT) return absl::NotFoundError(message);
  if (e == EACCES || e == EPERM || e == EROFS) return absl::PermissionDeniedError(message);
  return absl::InternalError(message);
}

uint32_t Crc32(absl::string_view bytes) {
  uLong crc = crc32(0L, Z_NULL, 0);
  // zlib takes uInt lengths: feed large payloads in pieces.
  while (!bytes.empty()) {
    const size_t n = std::min<size_t>(bytes.size(), 1u << 30);
    crc = crc32(crc, reinterpret_cast<const Bytef*>(bytes.data()), static_cast<uInt>(n));
    bytes.remove_prefix(n);
  }
  return static_cast<uint32_t>(crc);
}

void PutLittleEndian(uint64_t v, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

uint64_t GetLittleEndian(const char* p, int bytes) {
  uint64_t v = 0;
  for (int i = 0; i < bytes; ++i) v |= uint64_t{static_cast<unsigned char>(p[i])} << (8 * i);
  return v;
}

absl::Status WriteAll(int fd, absl::string_view bytes, const std::string& path) {
  while (!bytes.empty()) {
    const ssize_t n = ::write(fd, bytes.data(), bytes.size());
    if (n < 0) {
      if (errno == EINTR) continue;
      return ErrnoStatus("cannot write", path);
    }
    bytes.remove_prefix(static_cast<size_t>(n));
  }
  return absl::OkStatus();
}

absl::Status FsyncPath(const std::string& path, int flags) {
  const int fd = ::open(path.c_str(), flags);
  if (fd < 0) return ErrnoStatus("cannot open", path);
  const int r = ::fsync(fd);
  ::close(fd);
  if (r != 0) return ErrnoStatus("cannot fsync", path);
  return absl::OkStatus();
}

// The payload of a checkpoint file's bytes, or why there is none.
absl::StatusOr<absl::string_view> Payload(absl::string_view file) {
  if (file.size() < kHeaderBytes || file.substr(0, kMagicBytes) != kMagic) {
    return absl::DataLossError(absl::StrCat("not a checkpoint (", file.size(),
                                            " bytes, no PSCKPT01 header)"));
  }
  const uint64_t size = GetLittleEndian(file.data() + kMagicBytes, 8);
  const uint32_t crc = static_cast<uint32_t>(GetLittleEndian(file.data() + kMagicBytes + 8, 4));
  absl::string_view payload = file.substr(kHeaderBytes);
  if (payload.size() != size) {
    return absl::DataLossError(absl::StrCat("truncated: header says ", size,
                                            " payload bytes, the file has ", payload.size()));
  }
  if (Crc32(payload) != crc) return absl::DataLossError("checksum mismatch");
  return payload;
}

// Writes `pieces` to `tmp`, fsyncs it and renames it to `path`; on error
// `tmp` is gone and `path` untouched.
absl::Status WriteFileAtomically(const std::string& path, const std::string& tmp,
                                 std::initializer_list<absl::string_view> pieces) {
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", tmp);
  absl::Status s;
  for (absl::string_view piece : pieces) {
    if (s.ok()) s = WriteAll(fd, piece, tmp);
  }
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus("cannot fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus("cannot close", tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoStatus("cannot rename", tmp);
  if (!s.ok()) ::unlink(tmp.c_str());
  return s;
}

}  // namespace

absl::StatusOr<std::unique_ptr<CheckpointStore>> CheckpointStore::Open(
    const CheckpointStoreOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("checkpoint dir is empty");
  if (options.keep < 1) {
    return absl::InvalidArgumentError(absl::StrCat("must keep >= 1 checkpoints, got ",
                                                   options.keep));
  }
  if (options.num_shards < 1 || options.shard_id < 0 || options.shard_id >= options.num_shards) {
    return absl::InvalidArgumentError("bad shard position for a checkpoint store");
  }
  if (::mkdir(options.dir.c_str(), 0755) != 0 && errno != EEXIST) {
    return ErrnoStatus("cannot create checkpoint dir", options.dir);
  }
  if (::access(options.dir.c_str(), W_OK | X_OK) != 0) {
    return ErrnoStatus("cannot write to checkpoint dir", options.dir);
  }
  std::unique_ptr<CheckpointStore> store(new CheckpointStore(options));
  // An earlier run's staged snapshots belong to no checkpoint, nor do tier
  // snapshots whose file never got written (a crash between the two).
  std::error_code ec;
  for (std::filesystem::directory_iterator it(options.dir, ec), end; !ec && it != end;
       it.increment(ec)) {
    const std::string name = it->path().filename().string();
    absl::string_view base = name;
    if (absl::StartsWith(name, store->FilePrefix()) && absl::ConsumeSuffix(&base, ".tiers") &&
        !std::filesystem::exists(absl::StrCat(options.dir, "/", base, ".ckpt"))) {
      std::error_code ignored;
      std::filesystem::remove_all(it->path(), ignored);
    }
  }
  ec.clear();
  std::filesystem::remove_all(store->TierStagingDir(), ec);
  if (!ec) std::filesystem::create_directory(store->TierStagingDir(), ec);
  if (ec) {
    return absl::PermissionDeniedError(
        absl::StrCat("cannot make ", store->TierStagingDir(), " (tier snapshots): ", ec.message()));
  }
  return store;
}

std::string CheckpointStore::TierStagingDir() const {
  return absl::StrFormat("%s/.staging-shard-%d-of-%d", options_.dir, options_.shard_id,
                         options_.num_shards);
}

std::string CheckpointStore::TiersDirOf(const std::string& file) {
  absl::string_view base = file;
  absl::ConsumeSuffix(&base, ".ckpt");
  return absl::StrCat(base, ".tiers");
}

void CheckpointStore::Remove(const std::string& file) {
  ::unlink(file.c_str());
  std::error_code ignored;
  std::filesystem::remove_all(TiersDirOf(file), ignored);
}

absl::Status CheckpointStore::AdoptTierSnapshots(const ShardState& state, const std::string& file,
                                                 std::map<std::string, std::string>* stored) {
  const std::string staging = TierStagingDir() + "/";
  const std::string tiers = TiersDirOf(file);
  for (size_t k = 0; k < state.tables.size(); ++k) {
    const std::string& from = state.tables[k].tier_snapshot;
    if (from.empty()) continue;
    if (!absl::StartsWith(from, staging)) {  // one this directory holds already
      if (!absl::StartsWith(from, options_.dir + "/")) {
        return absl::InvalidArgumentError(
            absl::StrCat("checkpoint: the tier snapshot ", from, " is not under ", options_.dir));
      }
      (*stored)[from] = from.substr(options_.dir.size() + 1);
      continue;
    }
    const std::string to = absl::StrCat(tiers, "/", k);
    std::error_code ec;
    std::filesystem::remove_all(to, ec);  // an earlier try's
    if (!ec) std::filesystem::create_directories(tiers, ec);
    if (!ec) std::filesystem::rename(from, to, ec);
    if (ec) {
      return absl::InternalError(
          absl::StrCat("cannot move the tier snapshot ", from, " to ", to, ": ", ec.message()));
    }
    (*stored)[from] = to.substr(options_.dir.size() + 1);
  }
  if (!stored->empty() && std::filesystem::exists(tiers)) {
    RETURN_IF_ERROR(FsyncPath(tiers, O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  }
  return absl::OkStatus();
}

std::string CheckpointStore::FilePrefix() const {
  return absl::StrFormat("shard-%d-of-%d-v", options_.shard_id, options_.num_shards);
}

std::string CheckpointStore::FileName(int64_t version, bool delta) const {
  return absl::StrFormat("%s%020d%s", FilePrefix(), version, delta ? ".delta.ckpt" : ".ckpt");
}

std::vector<CheckpointStore::Entry> CheckpointStore::Entries() const {
  const std::string prefix = FilePrefix();
  std::vector<Entry> found;
  if (DIR* d = ::opendir(options_.dir.c_str()); d != nullptr) {
    while (const dirent* e = ::readdir(d)) {
      absl::string_view name = e->d_name;
      int64_t version;
      if (!absl::ConsumePrefix(&name, prefix)) continue;
      const bool delta = absl::ConsumeSuffix(&name, ".delta.ckpt");
      if ((delta || absl::ConsumeSuffix(&name, ".ckpt")) && name.size() == 20 &&
          absl::SimpleAtoi(name, &version)) {
        found.push_back(Entry{version, delta, absl::StrCat(options_.dir, "/", e->d_name)});
      }
    }
    ::closedir(d);
  }
  // Newest first; of one version, the full checkpoint first.
  std::sort(found.begin(), found.end(), [](const Entry& a, const Entry& b) {
    return a.version != b.version ? a.version > b.version : !a.delta && b.delta;
  });
  return found;
}

std::vector<std::string> CheckpointStore::List() const {
  std::vector<std::string> paths;
  for (Entry& e : Entries()) paths.push_back(std::move(e.path));
  return paths;
}

absl::StatusOr<std::string> CheckpointStore::Write(const ShardState& state) {
  if (state.shard_id != options_.shard_id || state.num_shards != options_.num_shards) {
    return absl::InvalidArgumentError("state of another shard position");
  }

  const bool delta = state.delta_base >= 0;
  const std::string path = absl::StrCat(options_.dir, "/", FileName(state.version, delta));
  const std::string tmp = absl::StrCat(options_.dir, "/.tmp-", FileName(state.version, delta));
  // The tiers' snapshots first, next to the file: the file's rename below
  // commits the checkpoint.
  std::map<std::string, std::string> stored;  // snapshot -> path in the file
  absl::Status s = AdoptTierSnapshots(state, path, &stored);
  if (s.ok()) {
    const std::string payload = EncodeShardState(
        state, [&stored](const std::string& snapshot) { return stored.at(snapshot); });
    std::string header(kMagic, kMagicBytes);
    PutLittleEndian(payload.size(), 8, &header);
    PutLittleEndian(Crc32(payload), 4, &header);
    s = WriteFileAtomically(path, tmp, {header, payload});
  }
  if (!s.ok()) {
    // Snapshots moved in may have replaced those of a file of this version:
    // that file no longer holds together.
    const std::string staging = TierStagingDir() + "/";
    if (std::any_of(state.tables.begin(), state.tables.end(), [&](const EmbeddingTableState& t) {
          return absl::StartsWith(t.tier_snapshot, staging);
        })) {
      Remove(path);
    }
    return s;
  }
  // The other kind of the same version is stale now.
  Remove(absl::StrCat(options_.dir, "/", FileName(state.version, !delta)));
  RETURN_IF_ERROR(FsyncPath(options_.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));

  // Pruned: the newest `keep` full checkpoints, and the deltas after the
  // oldest of them (older ones have no base kept).
  int fulls = 0;
  for (const Entry& e : Entries()) {
    if (fulls >= options_.keep) Remove(e.path);
    if (!e.delta) ++fulls;
  }
  return path;
}

absl::StatusOr<ShardState> CheckpointStore::Read(const std::string& path,
                                                 const SpecLimits& limits) const {
  std::ifstream in(path, std::ios::binary);
  std::stringstream bytes;
  bytes << in.rdbuf();
  if (!in) return absl::DataLossError("cannot read");
  const std::string file = bytes.str();
  ASSIGN_OR_RETURN(absl::string_view payload, Payload(file));
  ASSIGN_OR_RETURN(ShardState state, DecodeShardState(payload, limits));
  for (EmbeddingTableState& t : state.tables) {
    if (t.tier_snapshot.empty()) continue;
    t.tier_snapshot = absl::StrCat(options_.dir, "/", t.tier_snapshot);
    std::error_code ec;
    if (!std::filesystem::is_directory(t.tier_snapshot, ec)) {
      return absl::DataLossError(absl::StrCat("table \"", t.options.name, "\": its tier snapshot ",
                                              t.tier_snapshot, " is missing"));
    }
  }
  return state;
}

absl::StatusOr<std::optional<CheckpointStore::Loaded>> CheckpointStore::LoadNewest(
    const SpecLimits& limits, int64_t max_version) const {
  const auto skipped = [this](const std::string& path, const absl::Status& why) {
    if (options_.log) options_.log(absl::StrCat("checkpoint ", path, " skipped: ", why.message()));
  };
  std::vector<Entry> entries = Entries();
  for (size_t f = 0; f < entries.size(); ++f) {
    const Entry& full = entries[f];
    if (full.delta || full.version > max_version) continue;
    absl::StatusOr<ShardState> state = Read(full.path, limits);
    if (state.ok() && state->delta_base >= 0) {
      state = absl::DataLossError("a delta under a full checkpoint's name");
    }
    if (!state.ok()) {
      skipped(full.path, state.status());
      continue;
    }
    Loaded loaded{full.path, *std::move(state), 0};
    // Then its deltas, oldest first, while each is on the state so far.
    for (size_t d = f; d-- > 0;) {
      const Entry& next = entries[d];
      if (!next.delta || next.version > max_version) continue;
      absl::StatusOr<ShardState> delta = Read(next.path, limits);
      absl::Status applied =
          delta.ok() ? (delta->delta_base < 0 ? absl::DataLossError("not a delta")
                                              : ApplyDelta(*std::move(delta), &loaded.state))
                     : delta.status();
      if (!applied.ok()) {
        skipped(next.path, applied);
        break;  // the deltas after it are on it
      }
      loaded.path = next.path;
      ++loaded.deltas;
    }
    return loaded;
  }
  return std::nullopt;
}

}  // namespace ps
