#include "worker/ctr/det_math.h"

#include <cmath>
#include <limits>

namespace ps {
namespace {

// ln 2 split so that k * kLn2Hi is exact for |k| < 2^20 (fdlibm's constants).
constexpr double kLn2Hi = 6.93147180369123816490e-01;
constexpr double kLn2Lo = 1.90821492927058770002e-10;
constexpr double kInvLn2 = 1.44269504088896338700e+00;
constexpr double kSqrtHalf = 0.70710678118654752440;

// 2 atanh(z) = log((1 + z) / (1 - z)) by its series, for |z| <= 0.18.
double TwoAtanh(double z) {
  const double z2 = z * z;
  double s = 2.0 / 27.0;
  for (int n = 12; n >= 0; --n) s = 2.0 / (2 * n + 1) + z2 * s;
  return z * s;
}

// e^r - 1 by Taylor's series in Horner form, for |r| <= 0.35.
double Expm1Series(double r) {
  double p = 1.0;
  for (int n = 18; n >= 2; --n) p = 1.0 + r * p / n;
  return r * p;
}

}  // namespace

double DetLog(double x) {
  int e = 0;
  double m = std::frexp(x, &e);  // exact: x = m * 2^e, m in [0.5, 1)
  if (m < kSqrtHalf) {
    m *= 2.0;
    e -= 1;
  }
  // m in [0.707, 1.414): z in [-0.172, 0.172].
  const double z = (m - 1.0) / (m + 1.0);
  return e * kLn2Hi + (TwoAtanh(z) + e * kLn2Lo);
}

double DetLog1p(double x) {
  if (x > -0.25 && x < 0.25) return TwoAtanh(x / (2.0 + x));  // |z| < 0.143
  // u = 1 + x rounds; (u - 1) - x is that rounding error, exactly.
  const double u = 1.0 + x;
  return DetLog(u) - ((u - 1.0) - x) / u;
}

double DetExp(double x) {
  if (x < -745.0) return 0.0;
  if (x > 709.78) return std::numeric_limits<double>::infinity();
  const double kd = x * kInvLn2;
  const int k = static_cast<int>(kd < 0 ? kd - 0.5 : kd + 0.5);
  const double r = (x - k * kLn2Hi) - k * kLn2Lo;  // |r| <= 0.347
  return std::ldexp(1.0 + Expm1Series(r), k);      // ldexp is exact
}

double DetExpm1(double x) {
  if (x > -0.25 && x < 0.25) return Expm1Series(x);
  return DetExp(x) - 1.0;
}

double DetSigmoid(double x) {
  if (x >= 0) return 1.0 / (1.0 + DetExp(-x));
  const double e = DetExp(x);
  return e / (1.0 + e);
}

}  // namespace ps
