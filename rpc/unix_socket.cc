#include "rpc/unix_socket.h"

#include <errno.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <algorithm>
#include <cstdio>
#include <cstring>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

constexpr size_t kMaxPathBytes = sizeof(sockaddr_un::sun_path) - 1;

std::string ModeString(mode_t mode) { return absl::StrFormat("%04o", mode & 07777); }

}  // namespace

bool IsUnixAddress(absl::string_view address) {
  return absl::StartsWith(address, kUnixPrefix);
}

absl::StatusOr<std::string> UnixSocketPath(absl::string_view address, absl::string_view flag) {
  absl::string_view path = address;
  if (!absl::ConsumePrefix(&path, kUnixPrefix)) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", address, "' is not a unix:/ABS/PATH address"));
  }
  // gRPC's URI form unix:///ABS/PATH: an empty authority before the path.
  if (absl::StartsWith(path, "///")) path.remove_prefix(2);
  if (!absl::StartsWith(path, "/") || absl::StartsWith(path, "//")) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": '", address, "' needs an absolute path (unix:/ABS/PATH)"));
  }
  if (absl::EndsWith(path, "/")) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, ": '", address, "' names a folder, not a socket file"));
  }
  if (path.size() > kMaxPathBytes) {
    return absl::InvalidArgumentError(absl::StrCat(
        flag, ": the socket path of '", address, "' is ", path.size(),
        " bytes; a unix socket's path holds at most ", kMaxPathBytes));
  }
  return std::string(path);
}

std::string UnixSocketFolder(absl::string_view socket_path) {
  const size_t slash = socket_path.rfind('/');
  if (slash == absl::string_view::npos) return ".";
  if (slash == 0) return "/";
  return std::string(socket_path.substr(0, slash));
}

absl::Status CheckUnixSocketFolder(absl::string_view socket_path, absl::string_view flag,
                                   uid_t uid) {
  const std::string folder = UnixSocketFolder(socket_path);
  struct stat st;
  if (stat(folder.c_str(), &st) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, "=unix:", socket_path, ": the socket's folder ", folder, " cannot be used (",
        std::strerror(errno), "); create it with mode 0700 (mkdir -m 0700 ", folder, ")"));
  }
  if (!S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat(flag, "=unix:", socket_path, ": ", folder, " is not a folder"));
  }
  if (st.st_uid != uid || (st.st_mode & 077) != 0) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, "=unix:", socket_path, ": the socket's folder ", folder, " has mode ",
        ModeString(st.st_mode), " and owner uid ", st.st_uid,
        "; it must be owned by this server's user (uid ", uid,
        ") with no group or other permissions (chmod 0700 ", folder,
        "): on a unix socket the folder is the access control"));
  }
  return absl::OkStatus();
}

absl::Status PrepareUnixSocket(absl::string_view socket_path, absl::string_view flag,
                               bool* removed) {
  if (removed != nullptr) *removed = false;
  const std::string path(socket_path);
  struct stat st;
  if (lstat(path.c_str(), &st) != 0) {
    if (errno == ENOENT) return absl::OkStatus();
    return absl::FailedPreconditionError(
        absl::StrCat(flag, "=unix:", path, ": cannot inspect it: ", std::strerror(errno)));
  }
  if (!S_ISSOCK(st.st_mode)) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, "=unix:", path, ": a file that is not a socket is in the way; remove it"));
  }
  const int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) {
    return absl::InternalError(absl::StrCat("socket(AF_UNIX): ", std::strerror(errno)));
  }
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  std::memcpy(addr.sun_path, path.data(), std::min(path.size(), sizeof(addr.sun_path) - 1));
  // A listening socket accepts at once (the backlog), however busy its
  // server; a socket whose server died refuses.
  const int rc = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr));
  const int err = errno;
  close(fd);
  if (rc == 0 || err == EAGAIN) {
    return absl::UnavailableError(absl::StrCat(
        flag, "=unix:", path, ": address in use: a server is listening on that socket"));
  }
  if (err != ECONNREFUSED) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, "=unix:", path, ": cannot tell whether the socket there is in use: ",
        std::strerror(err)));
  }
  if (unlink(path.c_str()) != 0 && errno != ENOENT) {
    return absl::FailedPreconditionError(absl::StrCat(
        flag, "=unix:", path, ": cannot remove the stale socket: ", std::strerror(errno)));
  }
  if (removed != nullptr) *removed = true;
  return absl::OkStatus();
}

std::optional<ino_t> UnixSocketInode(absl::string_view socket_path) {
  struct stat st;
  if (lstat(std::string(socket_path).c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    return std::nullopt;
  }
  return st.st_ino;
}

void RemoveUnixSocket(absl::string_view socket_path, ino_t inode) {
  if (UnixSocketInode(socket_path) == inode) unlink(std::string(socket_path).c_str());
}

}  // namespace ps
