// The numpy arrays a Python ps.Client (python/ext/ps_module.cc) hands to
// the C++ client: their memory as the client's views and spans, without a
// copy, after checking dtype, layout and writeability (pybind11's
// TypeError and ValueError otherwise). The package checks the same with
// tensor names first; these checks are the last line. Call with the GIL
// held; the views borrow the arrays' memory, so the arrays must outlive
// the call that uses them (KeepAlive).
#ifndef PS_PYTHON_EXT_ARRAYS_H_
#define PS_PYTHON_EXT_ARRAYS_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <algorithm>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/types/span.h"
#include "client/ps_client.h"  // the client's views (common/model_spec.h)

namespace ps {

namespace py = pybind11;

// `a`'s memory as float32 elements, without a copy: TypeError unless it is
// a float32 array, ValueError unless C-contiguous (and, for weights to
// write, writeable). The package checks the same with tensor names first.
inline const float* FloatData(const py::array& a, const std::string& what, bool write) {
  if (!a.dtype().is(py::dtype::of<float>())) {
    throw py::type_error(what + ": dtype " + std::string(py::str(a.dtype())) +
                         ", expected float32");
  }
  if ((a.flags() & py::array::c_style) == 0) throw py::value_error(what + ": not C-contiguous");
  if (write && !a.writeable()) throw py::value_error(what + ": not writeable");
  return static_cast<const float*>(a.data());
}

inline ConstTensorViews ConstViews(const std::vector<py::array>& arrays) {
  ConstTensorViews out;
  for (size_t i = 0; i < arrays.size(); ++i) {
    const float* p = FloatData(arrays[i], "tensor " + std::to_string(i), /*write=*/false);
    out.emplace_back(p, static_cast<size_t>(arrays[i].size()));
  }
  return out;
}

inline TensorViews MutableViews(const std::vector<py::array>& arrays) {
  TensorViews out;
  for (size_t i = 0; i < arrays.size(); ++i) {
    float* p = const_cast<float*>(
        FloatData(arrays[i], "weights tensor " + std::to_string(i), /*write=*/true));
    out.emplace_back(p, static_cast<size_t>(arrays[i].size()));
  }
  return out;
}

// `ids`' memory as uint64 ids, without a copy: TypeError unless a uint64
// array, ValueError unless one-dimensional and C-contiguous.
inline absl::Span<const uint64_t> IdData(const py::array& ids, const std::string& table) {
  if (!ids.dtype().is(py::dtype::of<uint64_t>())) {
    throw py::type_error("ids of table '" + table + "': dtype " +
                         std::string(py::str(ids.dtype())) + ", expected uint64");
  }
  if (ids.ndim() != 1 || (ids.flags() & py::array::c_style) == 0) {
    throw py::value_error("ids of table '" + table + "': not a C-contiguous 1-D array");
  }
  return absl::Span<const uint64_t>(static_cast<const uint64_t*>(ids.data()),
                                    static_cast<size_t>(ids.size()));
}

// The fast path of a rows call: arguments the package hands on without
// converting or checking them, because they already are what the client
// reads. PlainIds: a 1-D C-contiguous array of uint64, or of int64 with
// every id >= 0 (the same bits). PlainRows: a C-contiguous float32 array of
// shape (n, dim), writeable when `write`. Anything else (lists, tensors,
// other dtypes, layouts or shapes, a negative id) gives nullopt or null,
// and the package converts and checks it, naming the problem.
inline std::optional<absl::Span<const uint64_t>> PlainIds(py::handle ids) {
  if (!py::isinstance<py::array>(ids)) return std::nullopt;
  const auto a = py::reinterpret_borrow<py::array>(ids);
  if (a.ndim() != 1 || (a.flags() & py::array::c_style) == 0) return std::nullopt;
  const py::dtype d = a.dtype();
  const auto n = static_cast<size_t>(a.size());
  if (d.is(py::dtype::of<int64_t>())) {
    const int64_t* p = static_cast<const int64_t*>(a.data());
    if (std::any_of(p, p + n, [](int64_t id) { return id < 0; })) return std::nullopt;
  } else if (!d.is(py::dtype::of<uint64_t>())) {
    return std::nullopt;
  }
  return absl::Span<const uint64_t>(static_cast<const uint64_t*>(a.data()), n);
}

inline float* PlainRows(py::handle rows, size_t n, int dim, bool write) {
  if (!py::isinstance<py::array>(rows)) return nullptr;
  const auto a = py::reinterpret_borrow<py::array>(rows);
  if (!a.dtype().is(py::dtype::of<float>()) || (a.flags() & py::array::c_style) == 0 ||
      a.ndim() != 2 || static_cast<size_t>(a.shape(0)) != n || a.shape(1) != dim ||
      (write && !a.writeable())) {
    return nullptr;
  }
  return static_cast<float*>(const_cast<void*>(a.data()));
}

// Keeps Python objects alive while a call may use their memory; made,
// copied and dropped only with the GIL held.
using KeepAlive = std::vector<py::object>;

}  // namespace ps

#endif  // PS_PYTHON_EXT_ARRAYS_H_
