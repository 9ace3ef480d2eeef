// Unix-domain socket addresses ("unix:/ABS/PATH"), for servers and clients
// that run on one host: what such an address is, and the checks a server
// makes on the socket's file before it listens there.
//
// On a unix socket the access control is the socket file's folder: the
// kernel lets a process connect only if it may search the folder and write
// the socket, so a folder owned by the server's user with no group or other
// permission bits (mode 0700) admits that user's processes and root, no
// one else. CheckUnixSocketFolder enforces it; rpc/credentials.h then
// allows plaintext there without --insecure (docs/security.md).
//
// gRPC itself unlinks whatever socket file is at the path when it binds,
// which would steal the address of a server still running there;
// PrepareUnixSocket runs first and removes only a stale file (a socket
// nobody listens on).
//
// Free functions, thread-safe; they touch only the file system.
#ifndef PS_RPC_UNIX_SOCKET_H_
#define PS_RPC_UNIX_SOCKET_H_

#include <sys/types.h>

#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

// The scheme prefix of a unix-socket address.
inline constexpr absl::string_view kUnixPrefix = "unix:";

// True if `address` is "unix:..." (well formed or not).
bool IsUnixAddress(absl::string_view address);

// The socket file's path of "unix:/ABS/PATH" (also gRPC's "unix:///ABS/PATH");
// INVALID_ARGUMENT naming `flag` if the path is not absolute, has no file
// name, or is longer than a socket address holds (107 bytes on Linux).
absl::StatusOr<std::string> UnixSocketPath(absl::string_view address, absl::string_view flag);

// The folder holding `socket_path`.
std::string UnixSocketFolder(absl::string_view socket_path);

// OK if the folder of `socket_path` exists, is a directory owned by `uid`,
// and grants no permission to group or others (mode 0700 or stricter);
// otherwise FAILED_PRECONDITION naming `flag`, the folder, and its mode and
// owner (or that it is missing).
absl::Status CheckUnixSocketFolder(absl::string_view socket_path, absl::string_view flag,
                                   uid_t uid);

// Before a server binds `socket_path`: nothing there, OK; a socket that
// refuses connections (its server is gone), removed, OK; a socket someone
// listens on, UNAVAILABLE "address in use"; anything else (a file, a
// folder), FAILED_PRECONDITION. Each naming `flag`. `removed` (may be null)
// is set when a stale socket was removed.
absl::Status PrepareUnixSocket(absl::string_view socket_path, absl::string_view flag,
                               bool* removed);

// The inode of the socket file at `socket_path`, or nullopt if there is no
// socket there.
std::optional<ino_t> UnixSocketInode(absl::string_view socket_path);

// After a server stopped: removes `socket_path` if it is still the socket
// it bound (inode `inode`), not one a later server made. Best effort.
void RemoveUnixSocket(absl::string_view socket_path, ino_t inode);

}  // namespace ps

#endif  // PS_RPC_UNIX_SOCKET_H_
