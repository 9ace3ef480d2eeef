// DetMath: elementary functions (log, exp, log1p, expm1) computed from IEEE
// basic arithmetic only, so their results are bit-identical on every x86-64
// machine; libm's may differ in the last bit between glibc versions and CPUs.
//
// The CTR generator (worker/ctr/data.h) uses them for everything that decides
// an example's ids and label, so example i is the same everywhere. They are
// accurate to a few ulps (tests compare with libm), not correctly rounded.
// Besides + - * /, only exact libm functions are used (frexp, ldexp, floor).
// Built with -ffp-contract=off (worker/BUILD): a fused multiply-add would
// change the bits on machines that have one. Pure functions: thread-safe.
#ifndef PS_WORKER_CTR_DET_MATH_H_
#define PS_WORKER_CTR_DET_MATH_H_

#include <cstdint>

namespace ps {

double DetLog(double x);    // REQUIRES: x > 0 and finite
double DetLog1p(double x);  // REQUIRES: x > -1 and finite
double DetExp(double x);    // 0 below -745, +inf above 709.8
double DetExpm1(double x);  // same range as DetExp
double DetSigmoid(double x);  // 1 / (1 + e^-x), without overflow

// SplitMix64's finalizer: a bijection on 64-bit integers whose outputs look
// independent for nearby inputs. The basis of the generator's counter-based
// hashing.
inline uint64_t SplitMix64(uint64_t x) {
  x ^= x >> 30;
  x *= 0xbf58476d1ce4e5b9ULL;
  x ^= x >> 27;
  x *= 0x94d049bb133111ebULL;
  x ^= x >> 31;
  return x;
}

// A hash of (seed, a, b, c): chained SplitMix64 over the words.
inline uint64_t Hash4(uint64_t seed, uint64_t a, uint64_t b, uint64_t c) {
  uint64_t h = SplitMix64(seed + 0x9e3779b97f4a7c15ULL);
  h = SplitMix64(h ^ a);
  h = SplitMix64((h + 0x9e3779b97f4a7c15ULL) ^ b);
  h = SplitMix64(h ^ c);
  return h;
}

// A uniform double in (0, 1), the midpoint of one of 2^52 equal cells
// picked by the top 52 bits of `h`: exact arithmetic.
inline double UnitFromBits(uint64_t h) {
  return (static_cast<double>(h >> 12) + 0.5) * (1.0 / 4503599627370496.0);
}

}  // namespace ps

#endif  // PS_WORKER_CTR_DET_MATH_H_
