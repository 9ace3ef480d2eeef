// Status propagation macros, for Debian's Abseil which ships none.
//
//   RETURN_IF_ERROR(DoThing());            // returns the status if not OK
//   ASSIGN_OR_RETURN(auto x, MakeThing()); // x = value, or returns the status
#ifndef PS_COMMON_STATUS_MACROS_H_
#define PS_COMMON_STATUS_MACROS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

#define PS_STATUS_CONCAT_INNER_(a, b) a##b
#define PS_STATUS_CONCAT_(a, b) PS_STATUS_CONCAT_INNER_(a, b)

#define RETURN_IF_ERROR(expr)                      \
  do {                                             \
    ::absl::Status ps_status_ = (expr);            \
    if (!ps_status_.ok()) return ps_status_;       \
  } while (0)

#define PS_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return tmp.status();             \
  lhs = std::move(tmp).value()

#define ASSIGN_OR_RETURN(lhs, expr) \
  PS_ASSIGN_OR_RETURN_IMPL_(PS_STATUS_CONCAT_(ps_statusor_, __LINE__), lhs, expr)

namespace ps {

// The status for the exception being handled; call only inside a catch
// block. Out of memory (std::bad_alloc, std::length_error) is
// RESOURCE_EXHAUSTED, anything else INTERNAL; the message starts with
// `where`. For the gRPC callbacks, which must never let an exception escape.
absl::Status StatusFromCurrentException(absl::string_view where);

}  // namespace ps

#endif  // PS_COMMON_STATUS_MACROS_H_
