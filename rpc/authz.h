// Who may call what on a parameter server: identities, their roles, the
// bearer-token table, and the authorization policy. Pure logic, no gRPC:
// rpc/auth_processor.h applies it to calls.
//
// Identities (a certificate's Subject CN, or a token's name):
//   worker-<id>  a worker (0 <= id); may Register, InitParams, Push, Pull,
//                PushPull, Heartbeat, Stream, PullRows, PushRows and
//                PushPullRows, each
//                only as its own id;
//                only worker-0 may create the parameters (InitParams with
//                values);
//   reader       may Pull, PullRows and GetStatus (evaluation jobs,
//                dashboards);
//   admin        may call everything (ps_ctl: status, checkpoint, ...).
// Anyone who passed the TLS handshake may ask the health service. Anything
// else is PERMISSION_DENIED naming the identity and the call; no identity
// at all (no certificate with one of these names, no valid token) is
// UNAUTHENTICATED.
//
// Thread-safe: Identity is a value; a TokenTable is immutable once loaded.
#ifndef PS_RPC_AUTHZ_H_
#define PS_RPC_AUTHZ_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

enum class Role { kWorker, kReader, kAdmin };

struct Identity {
  Role role = Role::kReader;
  int worker_id = -1;  // kWorker only
  std::string name;    // "worker-3", "reader", "admin"

  friend bool operator==(const Identity& a, const Identity& b) { return a.name == b.name; }
};

// "worker-<id>", "reader" or "admin"; INVALID_ARGUMENT otherwise.
absl::StatusOr<Identity> ParseIdentity(absl::string_view name);

// The identity a certificate names: its Subject CN, or a SAN URI
// "ps://worker/<id>", "ps://reader" or "ps://admin". `sans` may hold other
// names (DNS, IP), which are ignored. UNAUTHENTICATED when it names none or
// two different ones.
absl::StatusOr<Identity> IdentityFromCertificate(absl::string_view common_name,
                                                 const std::vector<std::string>& sans);

// The methods of proto/ps.proto's ParameterServer, the health service and
// reflection, as gRPC names them (":path").
inline constexpr absl::string_view kMethodPrefix = "/ps.v1.ParameterServer/";
inline constexpr absl::string_view kHealthPrefix = "/grpc.health.v1.Health/";

// The policy for a whole call: OK if `who` may call `method` at all
// (":path", e.g. "/ps.v1.ParameterServer/Push"). Health calls are not
// checked here (see above).
absl::Status AuthorizeMethod(const Identity& who, absl::string_view method);

// The policy for what a request says: OK if `who` may act as worker
// `worker_id` in `call` ("Push", "InitParams", ...); `creates_parameters`:
// an InitParams with values. Admins may act as any worker; readers as none.
absl::Status AuthorizeWorker(const Identity& who, absl::string_view call, int worker_id,
                             bool creates_parameters = false);

// Bearer tokens: the server's table, read from --auth_token_file. One
// "IDENTITY TOKEN" per line ('#' starts a comment); tokens are at least 16
// printable characters, no two alike. Lookup compares the presented token
// with every entry in time that depends only on the lengths.
class TokenTable {
 public:
  static absl::StatusOr<TokenTable> Load(const std::string& path);
  static absl::StatusOr<TokenTable> Parse(absl::string_view text, absl::string_view source);

  // The identity whose token `token` is; UNAUTHENTICATED if none.
  absl::StatusOr<Identity> Find(absl::string_view token) const;
  size_t size() const { return entries_.size(); }

 private:
  std::vector<std::pair<std::string, Identity>> entries_;
};

// A client's own token from its --auth_token_file: the first line that is
// not a comment, either "TOKEN" or "IDENTITY TOKEN" (a line of the server's
// table).
absl::StatusOr<std::string> LoadClientToken(const std::string& path);

// Equal contents, in time that depends only on the lengths.
bool ConstantTimeEquals(absl::string_view a, absl::string_view b);

}  // namespace ps

#endif  // PS_RPC_AUTHZ_H_
