#include "common/status_macros.h"

#include <exception>
#include <new>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace ps {

absl::Status StatusFromCurrentException(absl::string_view where) {
  try {
    throw;
  } catch (const std::bad_alloc&) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": out of memory"));
  } catch (const std::length_error& e) {
    return absl::ResourceExhaustedError(absl::StrCat(where, ": too large (", e.what(), ")"));
  } catch (const std::exception& e) {
    return absl::InternalError(absl::StrCat(where, ": unexpected exception: ", e.what()));
  } catch (...) {
    return absl::InternalError(absl::StrCat(where, ": unexpected exception"));
  }
}

}  // namespace ps
