// Sparse optimizers: the per-row update rules of embedding tables.
//
// An embedding table (server/core/embedding_table.h) applies a gradient only to
// the rows a push touches; every other row, and its optimizer state, stays
// as it was. Each rule below is the dense rule of the same name applied to
// one row, element by element, in float:
//   sgd:     w -= lr * g
//   adagrad: a += g*g;  w -= lr * g / (sqrt(a) + 1e-10)
//            (a starts at adagrad_initial_accumulator)
//   adam:    lazy: the row keeps its own step count t, advanced only when
//            the row is updated, and its bias correction uses that t:
//            t += 1;  m = b1*m + (1-b1)*g;  v = b2*v + (1-b2)*g*g;
//            w -= lr * (m / (1 - b1^t)) / (sqrt(v / (1 - b2^t)) + eps)
//            (1 - b^t computed in double, then rounded to float once)
//   ftrl:    FTRL-Proximal (McMahan et al. 2013, "Ad Click Prediction",
//            algorithm 1) with lr_power fixed at -0.5 and alpha = lr, per
//            element z and n starting at 0:
//            sigma = (sqrt(n + g*g) - sqrt(n)) / alpha;  z = z + g - sigma*w;
//            n += g*g;  w = 0 if |z| <= l1, else
//            w = -(z - sign(z)*l1) / ((beta + sqrt(n)) / alpha + l2)
// The state of a row is StateFloatsPerElement() * dim floats, laid out as
// blocks of dim: adagrad [a], adam [m | v], ftrl [z | n]; adam's step count
// is a separate uint32 per row.
//
// Pure functions and a plain options struct; thread-safe.
#ifndef PS_COMMON_SPARSE_OPTIMIZER_H_
#define PS_COMMON_SPARSE_OPTIMIZER_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

enum class SparseOptimizerKind { kSgd, kAdagrad, kAdam, kFtrl };

// "sgd", "adagrad", "adam", "ftrl".
absl::string_view SparseOptimizerName(SparseOptimizerKind kind);
// The kind of a name above; INVALID_ARGUMENT naming the known ones otherwise.
absl::StatusOr<SparseOptimizerKind> ParseSparseOptimizerKind(absl::string_view name);

struct SparseOptimizerOptions {
  SparseOptimizerKind kind = SparseOptimizerKind::kSgd;
  // Learning rate (FTRL's alpha), > 0 and finite.
  float lr = 0.01f;
  // AdaGrad's accumulator of a new row, >= 0.
  float adagrad_initial_accumulator = 0.1f;
  // Adam: 0 <= beta1 < 1, 0 <= beta2 < 1, eps > 0.
  float adam_beta1 = 0.9f;
  float adam_beta2 = 0.999f;
  float adam_eps = 1e-8f;
  // FTRL-Proximal: L1 and L2 strengths (>= 0) and beta (>= 0; with beta and
  // l2 both 0 the denominator is sqrt(n) / alpha, nonzero once |z| > l1).
  float ftrl_l1 = 0.0f;
  float ftrl_l2 = 0.0f;
  float ftrl_beta = 1.0f;

  // INVALID_ARGUMENT naming the first bad field and its allowed range.
  absl::Status Validate() const;
  // Optimizer state floats per row element: 0 sgd, 1 adagrad, 2 adam, 2 ftrl.
  int StateFloatsPerElement() const;
  // Whether each row keeps a step count (adam).
  bool HasRowStep() const { return kind == SparseOptimizerKind::kAdam; }
};

// Writes a new row's state: StateFloatsPerElement() * dim floats.
void InitSparseState(const SparseOptimizerOptions& options, int dim, float* state);

// Applies `grad` (dim floats) to one row: its `values` (dim floats), its
// `state` (as InitSparseState laid it out) and, for adam, its step count
// `step` (advanced by one, saturating; may be null for the other rules).
// REQUIRES: options.Validate() is OK.
void ApplySparseRow(const SparseOptimizerOptions& options, int dim, const float* grad,
                    float* values, float* state, uint32_t* step);

}  // namespace ps

#endif  // PS_COMMON_SPARSE_OPTIMIZER_H_
