// FUZZ_CHECK: a property of the wire fuzzer's targets (wire_fuzz.cc,
// rows_fuzz.cc). A broken one prints its line and aborts, which libFuzzer
// reports as a crash with the input (assert() is off in Bazel's opt builds).
#ifndef PS_TESTS_FUZZ_FUZZ_CHECK_H_
#define PS_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>

#define FUZZ_CHECK(cond)                                                              \
  do {                                                                                \
    if (!(cond)) {                                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                   \
    }                                                                                 \
  } while (0)

#endif  // PS_TESTS_FUZZ_FUZZ_CHECK_H_
