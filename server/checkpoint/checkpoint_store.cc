#include "server/checkpoint/checkpoint_store.h"

#include <dirent.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"
#include "server/checkpoint/checkpoint.h"

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
  return std::unique_ptr<CheckpointStore>(new CheckpointStore(options));
}

std::string CheckpointStore::FileName(int64_t version) const {
  return absl::StrFormat("shard-%d-of-%d-v%020d.ckpt", options_.shard_id, options_.num_shards,
                         version);
}

std::vector<std::string> CheckpointStore::List() const {
  const std::string prefix =
      absl::StrFormat("shard-%d-of-%d-v", options_.shard_id, options_.num_shards);
  std::vector<std::pair<int64_t, std::string>> found;
  if (DIR* d = ::opendir(options_.dir.c_str()); d != nullptr) {
    while (const dirent* e = ::readdir(d)) {
      absl::string_view name = e->d_name;
      int64_t version;
      if (absl::ConsumePrefix(&name, prefix) && absl::ConsumeSuffix(&name, ".ckpt") &&
          name.size() == 20 && absl::SimpleAtoi(name, &version)) {
        found.emplace_back(version, absl::StrCat(options_.dir, "/", e->d_name));
      }
    }
    ::closedir(d);
  }
  std::sort(found.rbegin(), found.rend());
  std::vector<std::string> paths;
  for (auto& f : found) paths.push_back(std::move(f.second));
  return paths;
}

absl::StatusOr<std::string> CheckpointStore::Write(const ShardState& state) {
  if (state.shard_id != options_.shard_id || state.num_shards != options_.num_shards) {
    return absl::InvalidArgumentError("state of another shard position");
  }
  const std::string payload = EncodeShardState(state);
  std::string header(kMagic, kMagicBytes);
  PutLittleEndian(payload.size(), 8, &header);
  PutLittleEndian(Crc32(payload), 4, &header);

  const std::string path = absl::StrCat(options_.dir, "/", FileName(state.version));
  const std::string tmp = absl::StrCat(options_.dir, "/.tmp-", FileName(state.version));
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return ErrnoStatus("cannot create", tmp);
  absl::Status s = WriteAll(fd, header, tmp);
  if (s.ok()) s = WriteAll(fd, payload, tmp);
  if (s.ok() && ::fsync(fd) != 0) s = ErrnoStatus("cannot fsync", tmp);
  if (::close(fd) != 0 && s.ok()) s = ErrnoStatus("cannot close", tmp);
  if (s.ok() && ::rename(tmp.c_str(), path.c_str()) != 0) s = ErrnoStatus("cannot rename", tmp);
  if (!s.ok()) {
    ::unlink(tmp.c_str());
    return s;
  }
  RETURN_IF_ERROR(FsyncPath(options_.dir, O_RDONLY | O_DIRECTORY | O_CLOEXEC));

  const std::vector<std::string> all = List();
  for (size_t i = options_.keep; i < all.size(); ++i) ::unlink(all[i].c_str());
  return path;
}

absl::StatusOr<std::optional<CheckpointStore::Loaded>> CheckpointStore::LoadNewest(
    const SpecLimits& limits, int64_t max_version) const {
  for (const std::string& path : List()) {
    std::ifstream in(path, std::ios::binary);
    std::stringstream bytes;
    bytes << in.rdbuf();
    if (!in) {
      if (options_.log) options_.log(absl::StrCat("checkpoint ", path, " skipped: cannot read"));
      continue;
    }
    const std::string file = bytes.str();
    absl::StatusOr<absl::string_view> payload = Payload(file);
    absl::StatusOr<ShardState> state =
        payload.ok() ? DecodeShardState(*payload, limits) : payload.status();
    if (!state.ok()) {
      if (options_.log) {
        options_.log(absl::StrCat("checkpoint ", path, " skipped: ", state.status().message()));
      }
      continue;
    }
    if (state->version > max_version) continue;
    return Loaded{path, *std::move(state)};
  }
  return std::nullopt;
}

}  // namespace ps
