// The project's version (version.bzl's PS_VERSION), for ps_build_info on
// /metrics and --version. Thread-safe: a constant.
#ifndef PS_COMMON_VERSION_H_
#define PS_COMMON_VERSION_H_

namespace ps {

// "MAJOR.MINOR.PATCH".
const char* Version();

}  // namespace ps

#endif  // PS_COMMON_VERSION_H_
