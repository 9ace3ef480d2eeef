// _ps: the pybind11 extension behind the `ps` Python package
// (python/ps_src/__init__.py, which users import). A thin binding of
// client/ps_client.h: the package checks names, dtypes and shapes and turns
// dicts into the ordered lists this module takes; this module copies arrays
// into and out of TensorLists, releases the GIL while the client waits, and
// turns a failed absl::Status into the package's exception class for its
// code (registered by the package with _register_errors).
//
// Built with -fvisibility=hidden so that its copies of gRPC's and Abseil's
// symbols cannot clash with another extension in the same process.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <chrono>
#include <functional>
#include <future>
#include <memory>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "client/ps_client.h"
#include "common/mode.h"

namespace py = pybind11;

namespace ps {
namespace {

// A failed call: becomes the exception class the package registered for
// `code` (ps.Error when none).
struct StatusError {
  int code;
  std::string message;
};

// Status code (int) -> exception class, set once by the package. Never
// freed: it must outlive every call, and the interpreter frees the classes.
py::dict* error_classes = nullptr;

void ThrowIfError(const absl::Status& s) {
  if (!s.ok()) throw StatusError{static_cast<int>(s.code()), std::string(s.message())};
}

using FloatArray = py::array_t<float, py::array::c_style>;

// The arrays' elements, copied. The package has checked the count and each
// size against the spec.
TensorList ToTensors(const std::vector<FloatArray>& arrays) {
  TensorList out(arrays.size());
  for (size_t i = 0; i < arrays.size(); ++i) {
    out[i].assign(arrays[i].data(), arrays[i].data() + arrays[i].size());
  }
  return out;
}

// One new float32 array per tensor, shaped as the spec says.
std::vector<py::array> ToArrays(const TensorList& tensors, const ModelSpec& spec) {
  std::vector<py::array> out;
  out.reserve(tensors.size());
  for (size_t i = 0; i < tensors.size(); ++i) {
    FloatArray a(spec[i].shape);
    std::copy(tensors[i].begin(), tensors[i].end(), a.mutable_data());
    out.push_back(std::move(a));
  }
  return out;
}

// A connected PsClient. Not thread-safe: one thread per client, as
// PsClient itself.
//
// Ctrl-C: each call runs on a helper thread while the calling thread, GIL
// released, checks for signals every 100 ms; on one it raises (e.g.
// KeyboardInterrupt) at once. The interrupted call goes on until its own
// deadline; the next call, or the client's destruction, waits for it first
// (an interrupted Connect is left to finish on its own).
class Client {
 public:
  Client(std::vector<std::string> servers, int worker_id, int num_workers,
         std::string tls_cert, std::string tls_key, std::string tls_ca, std::string server_name,
         std::string auth_token_file, bool insecure, std::string transport,
         double connect_timeout, double wait_timeout, double retry_timeout) {
    ClientOptions o;
    o.servers = std::move(servers);
    o.worker_id = worker_id;
    o.num_workers = num_workers;
    o.security.tls_cert = std::move(tls_cert);
    o.security.tls_key = std::move(tls_key);
    o.security.tls_ca = std::move(tls_ca);
    o.security.tls_server_name = std::move(server_name);
    o.security.auth_token_file = std::move(auth_token_file);
    o.security.insecure = insecure;
    absl::StatusOr<ClientOptions::Transport> t = ParseTransport(transport);
    ThrowIfError(t.status());
    o.transport = *t;
    o.connect_timeout = absl::Seconds(connect_timeout);
    o.wait_timeout = absl::Seconds(wait_timeout);
    o.retry_timeout = absl::Seconds(retry_timeout);
    ThrowIfError(ValidateClientOptions(o));
    // Captures no `this`: a Ctrl-C may leave it running after we throw.
    auto c = std::make_shared<absl::StatusOr<std::unique_ptr<PsClient>>>();
    ThrowIfError(Run([c, o] {
      *c = PsClient::Connect(o);
      return c->status();
    }));
    client_ = std::move(**c);
  }

  // `shapes` by tensor; `values` only from the worker that creates them.
  void Init(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
            const std::optional<std::vector<FloatArray>>& values) {
    // Shared with the call, which may outlive this frame (Ctrl-C).
    auto spec = std::make_shared<ModelSpec>(names.size());
    for (size_t i = 0; i < names.size(); ++i) (*spec)[i] = TensorSpec{names[i], shapes[i]};
    std::shared_ptr<const TensorList> init;
    if (values) init = std::make_shared<const TensorList>(ToTensors(*values));
    ThrowIfError(Run([this, spec, init] { return client_->Init(*spec, init.get()); }));
  }

  std::vector<py::array> Pull(int64_t min_version) {
    auto weights = std::make_shared<TensorList>();
    ThrowIfError(Run([this, weights, min_version] {
      return client_->Pull(min_version, weights.get());
    }));
    return ToArrays(*weights, client_->spec());
  }

  void Push(const std::vector<FloatArray>& grads) {
    auto g = std::make_shared<const TensorList>(ToTensors(grads));
    ThrowIfError(Run([this, g] { return client_->Push(*g); }));
  }

  std::vector<py::array> PushPull(const std::vector<FloatArray>& grads) {
    auto g = std::make_shared<const TensorList>(ToTensors(grads));
    auto weights = std::make_shared<TensorList>();
    ThrowIfError(Run([this, g, weights] { return client_->PushPull(*g, weights.get()); }));
    return ToArrays(*weights, client_->spec());
  }

  ~Client() {
    if (pending_.valid()) {
      py::gil_scoped_release release;
      pending_.wait();
    }
  }

  int64_t version() const { return client_->version(); }
  std::string mode() const { return ModeName(client_->mode()); }
  int num_shards() const { return client_->num_shards(); }
  // The servers' tensors, in order: (name, shape) pairs; empty before init.
  std::vector<std::pair<std::string, std::vector<int64_t>>> spec() const {
    std::vector<std::pair<std::string, std::vector<int64_t>>> out;
    for (const TensorSpec& t : client_->spec()) out.emplace_back(t.name, t.shape);
    return out;
  }

 private:
  // Runs `call` on a helper thread; returns its status, or throws the
  // Python error a signal handler set (the call then stays pending_).
  // Called with the GIL held.
  absl::Status Run(std::function<absl::Status()> call) {
    Drain();
    // A detached thread and a packaged_task's future, which (unlike
    // std::async's) does not block in its destructor.
    std::packaged_task<absl::Status()> task(std::move(call));
    std::future<absl::Status> f = task.get_future();
    std::thread(std::move(task)).detach();
    while (true) {
      {
        py::gil_scoped_release release;
        if (f.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready) break;
      }
      if (PyErr_CheckSignals() != 0) {
        pending_ = std::move(f);
        throw py::error_already_set();
      }
    }
    return f.get();
  }

  // Waits for a call that a signal interrupted (interruptibly too).
  void Drain() {
    while (pending_.valid()) {
      {
        py::gil_scoped_release release;
        if (pending_.wait_for(std::chrono::milliseconds(100)) == std::future_status::ready) {
          pending_ = {};
          break;
        }
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
  }

  std::unique_ptr<PsClient> client_;
  std::future<absl::Status> pending_;  // a call interrupted by a signal
};

}  // namespace
}  // namespace ps

PYBIND11_MODULE(_ps, m) {
  m.doc() = "The C++ parameter-server client; use it through the `ps` package.";
  m.def(
      "_register_errors", [](py::dict classes) { ps::error_classes = new py::dict(classes); },
      "Sets the exception class for each status code (int -> class).");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ps::StatusError& e) {
      py::object cls = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
      if (ps::error_classes != nullptr && ps::error_classes->contains(py::int_(e.code))) {
        cls = (*ps::error_classes)[py::int_(e.code)];
      }
      PyErr_SetObject(cls.ptr(), py::str(e.message).ptr());
    }
  });
  py::class_<ps::Client>(m, "Client")
      .def(py::init<std::vector<std::string>, int, int, std::string, std::string, std::string,
                    std::string, std::string, bool, std::string, double, double, double>())
      .def("init", &ps::Client::Init)
      .def("pull", &ps::Client::Pull)
      .def("push", &ps::Client::Push)
      .def("push_pull", &ps::Client::PushPull)
      .def_property_readonly("version", &ps::Client::version)
      .def_property_readonly("mode", &ps::Client::mode)
      .def_property_readonly("num_shards", &ps::Client::num_shards)
      .def_property_readonly("spec", &ps::Client::spec);
}
