#include "rpc/authz.h"

#include <fstream>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

constexpr absl::string_view kWorkerPrefix = "worker-";
constexpr absl::string_view kUriPrefix = "ps://";

absl::StatusOr<std::string> ReadFile(const std::string& path, absl::string_view flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(flag, ": cannot read ", path));
  std::ostringstream text;
  text << in.rdbuf();
  return text.str();
}

// The lines of `text` that are not blank or comments, split on whitespace.
std::vector<std::vector<absl::string_view>> Records(absl::string_view text) {
  std::vector<std::vector<absl::string_view>> out;
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    line = line.substr(0, line.find('#'));
    std::vector<absl::string_view> fields =
        absl::StrSplit(line, absl::ByAnyChar(" \t\r"), absl::SkipEmpty());
    if (!fields.empty()) out.push_back(std::move(fields));
  }
  return out;
}

bool IsWorkerCall(absl::string_view call) {
  return call == "Register" || call == "InitParams" || call == "Push" || call == "PushPull" ||
         call == "Heartbeat" || call == "Stream" || call == "PushRows" || call == "PushPullRows";
}

// Calls that only read the parameters.
bool IsReadCall(absl::string_view call) { return call == "Pull" || call == "PullRows"; }

absl::Status Denied(const Identity& who, absl::string_view what) {
  return absl::PermissionDeniedError(absl::StrCat(who.name, " may not ", what));
}

}  // namespace

absl::StatusOr<Identity> ParseIdentity(absl::string_view name) {
  Identity id;
  id.name = std::string(name);
  if (name == "admin") {
    id.role = Role::kAdmin;
    return id;
  }
  if (name == "reader") {
    id.role = Role::kReader;
    return id;
  }
  int worker = -1;
  if (absl::ConsumePrefix(&name, kWorkerPrefix) && !name.empty() &&
      absl::ascii_isdigit(static_cast<unsigned char>(name[0])) && absl::SimpleAtoi(name, &worker) &&
      worker >= 0 && absl::StrCat(worker) == name) {
    id.role = Role::kWorker;
    id.worker_id = worker;
    return id;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("'", id.name, "' is not an identity (worker-<id>, reader or admin)"));
}

absl::StatusOr<Identity> IdentityFromCertificate(absl::string_view common_name,
                                                 const std::vector<std::string>& sans) {
  std::vector<Identity> found;
  if (absl::StatusOr<Identity> cn = ParseIdentity(common_name); cn.ok()) found.push_back(*cn);
  for (absl::string_view san : sans) {
    if (!absl::ConsumePrefix(&san, kUriPrefix)) continue;
    // ps://worker/3 -> worker-3; ps://reader, ps://admin.
    std::string name(san);
    if (absl::ConsumePrefix(&san, "worker/")) name = absl::StrCat(kWorkerPrefix, san);
    absl::StatusOr<Identity> id = ParseIdentity(name);
    if (!id.ok()) {
      return absl::UnauthenticatedError(
          absl::StrCat("certificate SAN URI '", kUriPrefix, name, "' names no identity"));
    }
    found.push_back(*id);
  }
  if (found.empty()) {
    return absl::UnauthenticatedError(absl::StrCat(
        "certificate (CN '", common_name,
        "') names no identity: CN worker-<id>, reader or admin, or SAN URI ps://worker/<id>"));
  }
  for (const Identity& id : found) {
    if (!(id == found[0])) {
      return absl::UnauthenticatedError(
          absl::StrCat("certificate names two identities: ", found[0].name, " and ", id.name));
    }
  }
  return found[0];
}

absl::Status AuthorizeMethod(const Identity& who, absl::string_view method) {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  absl::string_view call = method;
  if (absl::ConsumePrefix(&call, kMethodPrefix)) {
    if (who.role == Role::kWorker && (IsWorkerCall(call) || IsReadCall(call))) {
      return absl::OkStatus();
    }
    if (who.role == Role::kReader && (IsReadCall(call) || call == "GetStatus")) {
      return absl::OkStatus();
    }
  }
  return Denied(who, absl::StrCat("call ", method));
}

absl::Status AuthorizeWorker(const Identity& who, absl::string_view call, int worker_id,
                             bool creates_parameters) {
  if (who.role == Role::kAdmin) return absl::OkStatus();
  if (who.role == Role::kReader) {
    if (IsReadCall(call)) return absl::OkStatus();  // reads only; no lease renewed
    return Denied(who, absl::StrCat("call ", call));
  }
  if (worker_id != who.worker_id) {
    return Denied(who, absl::StrCat("call ", call, " as worker ", worker_id));
  }
  if (creates_parameters && who.worker_id != 0) {
    return Denied(
        who, absl::StrCat("call ", call, " with values (only worker-0 creates the parameters)"));
  }
  return absl::OkStatus();
}

absl::StatusOr<TokenTable> TokenTable::Parse(absl::string_view text, absl::string_view source) {
  TokenTable table;
  for (const std::vector<absl::string_view>& fields : Records(text)) {
    if (fields.size() != 2) {
      return absl::InvalidArgumentError(absl::StrCat(
          source, ": expected lines 'IDENTITY TOKEN', got '", absl::StrJoin(fields, " "), "'"));
    }
    absl::StatusOr<Identity> id = ParseIdentity(fields[0]);
    if (!id.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(source, ": ", id.status().message()));
    }
    if (fields[1].size() < 16) {
      return absl::InvalidArgumentError(
          absl::StrCat(source, ": the token of ", id->name, " is shorter than 16 characters"));
    }
    for (const auto& [token, other] : table.entries_) {
      if (token == fields[1]) {
        return absl::InvalidArgumentError(
            absl::StrCat(source, ": ", other.name, " and ", id->name, " have the same token"));
      }
    }
    table.entries_.emplace_back(std::string(fields[1]), *std::move(id));
  }
  if (table.entries_.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(source, ": no tokens"));
  }
  return table;
}

absl::StatusOr<TokenTable> TokenTable::Load(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "--auth_token_file");
  if (!text.ok()) return text.status();
  return Parse(*text, path);
}

absl::StatusOr<Identity> TokenTable::Find(absl::string_view token) const {
  const Identity* match = nullptr;
  for (const auto& entry : entries_) {  // no early exit
    if (ConstantTimeEquals(entry.first, token)) match = &entry.second;
  }
  if (match == nullptr) return absl::UnauthenticatedError("invalid bearer token");
  return *match;
}

absl::StatusOr<std::string> LoadClientToken(const std::string& path) {
  absl::StatusOr<std::string> text = ReadFile(path, "--auth_token_file");
  if (!text.ok()) return text.status();
  std::vector<std::vector<absl::string_view>> records = Records(*text);
  if (records.empty() || records[0].size() > 2) {
    return absl::InvalidArgumentError(
        absl::StrCat("--auth_token_file: ", path, " holds no line 'TOKEN' or 'IDENTITY TOKEN'"));
  }
  return std::string(records[0].back());
}

bool ConstantTimeEquals(absl::string_view a, absl::string_view b) {
  // Every byte of `a` is compared, whatever `b` is.
  volatile unsigned char diff = a.size() == b.size() ? 0 : 1;
  for (size_t i = 0; i < a.size(); ++i) {
    diff |=
        static_cast<unsigned char>(a[i]) ^ static_cast<unsigned char>(i < b.size() ? b[i] : ~a[i]);
  }
  return diff == 0;
}

}  // namespace ps
