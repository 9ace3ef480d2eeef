// _ps: the pybind11 extension behind the `ps` Python package
// (python/src/ps/__init__.py, which users import; python/src/ps/_ps.pyi
// states its types). A thin binding of client/ps_client.h (tensors and
// embedding rows): the package checks names, dtypes and shapes, turns dicts
// into the ordered lists this module takes and ids into uint64 arrays (the
// rows calls first try this module's fast path, which takes plain arrays
// that Python has not checked: python/ext/arrays.h); this module hands the
// arrays' memory to the client as views (no copy: gradients are read
// straight into the messages, weights written straight into the arrays),
// runs every blocking call on the calling thread with the GIL released,
// cancels it on Ctrl-C (PsClient::Cancel, through the client's interrupt
// check), and turns a failed absl::Status
// into the package's exception class for its code (registered by the
// package with _register_errors).
//
// Built with -fvisibility=hidden so that its copies of gRPC's and Abseil's
// symbols cannot clash with another extension in the same process.
#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <algorithm>
#include <atomic>
#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/strings/string_view.h"
#include "absl/synchronization/mutex.h"
#include "client/ps_client.h"
#include "common/mode.h"
#include "common/mutex_checks.h"
#include "common/table_spec.h"
#include "common/wire_dtype.h"
#include "python/ext/arrays.h"
#include "python/ext/call_thread.h"
#include "python/ext/handles.h"
#include "python/ext/in_flight.h"
#include "python/ext/job_member.h"

namespace py = pybind11;

namespace ps {

// A failed call: becomes the exception class the package registered for
// `code` (RuntimeError when none is).
struct StatusError {
  int code;
  std::string message;
};

void ThrowIfError(const absl::Status& s) {
  if (!s.ok()) throw StatusError{static_cast<int>(s.code()), std::string(s.message())};
}

namespace {

// Status code -> exception class, set once by the package. Never freed: it
// must outlive every call, and the interpreter frees the classes.
std::map<int, py::object>* error_classes = nullptr;

// How long an interrupted or closing client waits for its cancelled call
// to end. Cancelled calls end in milliseconds; one that has not by then is
// left to finish on its own.
constexpr absl::Duration kCancelGrace = absl::Seconds(2);

// A connected PsClient. Not thread-safe: one thread per client, as
// PsClient itself, except close(), which another thread may call to end a
// blocked call. Every member is used with the GIL held.
//
// Each call runs on the calling thread with the GIL released (no handoff
// to another thread: a rows call costs microseconds more than in C++). The
// PsClient polls its interrupt check (InFlight::Interrupted) every 100 ms
// while the call waits: on a signal whose handler raises (Ctrl-C) the call
// is cancelled (PsClient::Cancel), ends at once, and the handler's exception
// is raised. Connect runs on a CallThread while the constructor checks for
// signals: an interrupted constructor raises at once and leaves it to
// finish on the detached thread, holding nothing of the caller's.
//
// close() (and destruction) cancels the call in flight and the layer-wise
// push-pull not waited on, then destroys the PsClient, whose streams close;
// later calls raise ValueError. A call still running after kCancelGrace is
// left to finish on its own, with the PsClient and the arrays it uses
// leaked.
class Client final : public HandleOwner {
 public:
  Client(std::vector<std::string> servers, int worker_id, int num_workers, std::string tls_cert,
         std::string tls_key, std::string tls_ca, std::string server_name,
         std::string auth_token_file, bool insecure, std::string transport, std::string wire_dtype,
         double connect_timeout, double wait_timeout, double retry_timeout,
         const py::object& follow) {
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
    absl::StatusOr<WireDtype> d = ParseWireDtype(wire_dtype);
    ThrowIfError(d.status());
    o.wire_dtype = *d;
    o.connect_timeout = absl::Seconds(connect_timeout);
    o.wait_timeout = absl::Seconds(wait_timeout);
    o.retry_timeout = absl::Seconds(retry_timeout);
    o.interrupt = [in_flight = in_flight_] { return in_flight->Interrupted(); };
    // A JobMember whose shard map the client follows when a server moves
    // (ClientOptions::find_servers), or None.
    if (!follow.is_none()) {
      const JobMember& member = follow.cast<const JobMember&>();
      o.find_servers = member.ServerFinder();
      o.shard_map_version = member.map_version();
    }
    ThrowIfError(ValidateClientOptions(o));
    // Captures no `this`: a Ctrl-C leaves it running after we throw.
    auto c = std::make_shared<absl::StatusOr<std::unique_ptr<PsClient>>>();
    thread_.Start([c, o] {
      *c = PsClient::Connect(o);
      return c->status();
    });
    while (true) {
      {
        py::gil_scoped_release release;
        if (thread_.Wait(absl::Milliseconds(100))) break;
      }
      if (PyErr_CheckSignals() != 0) throw py::error_already_set();
    }
    ThrowIfError(thread_.Take());
    client_ = std::move(**c);
  }

  ~Client() override { Close(); }

  // `shapes` by tensor; `values` only from the worker that creates them.
  void Init(const std::vector<std::string>& names, const std::vector<std::vector<int64_t>>& shapes,
            const std::optional<std::vector<py::array>>& values) {
    ModelSpec spec(names.size());
    for (size_t i = 0; i < names.size(); ++i) spec[i] = TensorSpec{names[i], shapes[i]};
    if (!values) {
      ThrowIfError(Run([spec](PsClient& c) { return c.Init(spec, nullptr); }));
      return;
    }
    ThrowIfError(
        Run([spec, views = ConstViews(*values)](PsClient& c) { return c.Init(spec, views); }));
  }

  // Pulls into `out` (new arrays when not given) and returns it.
  std::vector<py::array> Pull(int64_t min_version, std::optional<std::vector<py::array>> out) {
    std::vector<py::array> weights = out ? std::move(*out) : NewWeights();
    ThrowIfError(Run([views = MutableViews(weights), min_version](PsClient& c) {
      return c.Pull(min_version, views);
    }));
    return weights;
  }

  void Push(const std::vector<py::array>& grads) {
    ThrowIfError(Run([views = ConstViews(grads)](PsClient& c) { return c.Push(views); }));
  }

  std::vector<py::array> PushPull(const std::vector<py::array>& grads,
                                  std::optional<std::vector<py::array>> out) {
    std::vector<py::array> weights = out ? std::move(*out) : NewWeights();
    ThrowIfError(Run([g = ConstViews(grads), w = MutableViews(weights)](PsClient& c) {
      return c.PushPull(g, w);
    }));
    return weights;
  }

  // The model's embedding tables, before Init: (name, dim, seed, init_scale).
  void DeclareTables(const std::vector<std::tuple<std::string, int, uint64_t, float>>& tables) {
    std::vector<TableSpec> specs;
    for (const auto& [name, dim, seed, init_scale] : tables) {
      specs.push_back(TableSpec{name, dim, seed, init_scale});
    }
    ThrowIfError(Open().DeclareTables(specs));
  }

  // The rows calls' fast path (PlainIds, PlainRows in python/ext/arrays.h):
  // each returns None, calling nothing, when `table` is not a declared
  // table's name or an argument is not plain; the package then converts
  // and checks them, naming the problem, and calls again.

  // The rows of `ids` into `out` (a new array when None), which it returns.
  std::optional<py::array> PullRows(py::object table, py::object ids, py::object out) {
    const TableSpec* const t = Declared(table);
    const std::optional<absl::Span<const uint64_t>> id = PlainIds(ids);
    if (t == nullptr || !id) return std::nullopt;
    py::object rows = out.is_none() ? NewRows(id->size(), t->dim) : out;
    float* p = PlainRows(rows, id->size(), t->dim, /*write=*/true);
    if (p == nullptr) return std::nullopt;
    if (id->empty()) return py::reinterpret_borrow<py::array>(rows);
    const absl::Span<float> r(p, id->size() * static_cast<size_t>(t->dim));
    ThrowIfError(Run([&](PsClient& c) { return c.PullRows(t->name, *id, r); }));
    return py::reinterpret_borrow<py::array>(rows);
  }

  // Pushes the gradient rows `grads` of `ids`; true, or None as above.
  std::optional<bool> PushRows(py::object table, py::object ids, py::object grads) {
    const TableSpec* const t = Declared(table);
    const std::optional<absl::Span<const uint64_t>> id = PlainIds(ids);
    if (t == nullptr || !id) return std::nullopt;
    const float* p = PlainRows(grads, id->size(), t->dim, /*write=*/false);
    if (p == nullptr) return std::nullopt;
    const absl::Span<const float> g(p, id->size() * static_cast<size_t>(t->dim));
    ThrowIfError(Run([&](PsClient& c) { return c.PushRows(t->name, *id, g); }));
    return true;
  }

  // Pushes `grads` and writes the rows after the push into `out` (a new
  // array when None; async, SSP), which it returns.
  std::optional<py::array> PushPullRows(py::object table, py::object ids, py::object grads,
                                        py::object out) {
    const TableSpec* const t = Declared(table);
    const std::optional<absl::Span<const uint64_t>> id = PlainIds(ids);
    if (t == nullptr || !id) return std::nullopt;
    const float* gp = PlainRows(grads, id->size(), t->dim, /*write=*/false);
    py::object rows = out.is_none() ? NewRows(id->size(), t->dim) : out;
    float* p = PlainRows(rows, id->size(), t->dim, /*write=*/true);
    if (gp == nullptr || p == nullptr) return std::nullopt;
    if (id->empty()) return py::reinterpret_borrow<py::array>(rows);
    const size_t floats = id->size() * static_cast<size_t>(t->dim);
    const absl::Span<const float> g(gp, floats);
    const absl::Span<float> r(p, floats);
    ThrowIfError(Run([&](PsClient& c) { return c.PushPullRows(t->name, *id, g, r); }));
    return py::reinterpret_borrow<py::array>(rows);
  }

  // python/rows_bench.py's baseline: `calls` rows calls of `op` ("pull",
  // "push" or "push_pull") on requests[i % n] with `grads` and `out` (each
  // request's size of rows), made straight from C++ as a C++ program makes
  // them, on this thread; each call's seconds.
  std::vector<double> TimeRows(const std::string& table, const std::vector<py::array>& requests,
                               const std::string& op, const py::array& grads, py::array out,
                               int64_t calls) {
    if (op != "pull" && op != "push" && op != "push_pull") {
      throw py::value_error("op must be pull, push or push_pull, not " + op);
    }
    if (requests.empty()) throw py::value_error("no requests");
    std::vector<absl::Span<const uint64_t>> ids;
    for (const py::array& r : requests) ids.push_back(IdData(r, table));
    const float* gp = FloatData(grads, "gradient rows of table '" + table + "'", /*write=*/false);
    const absl::Span<const float> g(gp, static_cast<size_t>(grads.size()));
    float* p = const_cast<float*>(FloatData(out, "rows of table '" + table + "'", /*write=*/true));
    const absl::Span<float> rows(p, static_cast<size_t>(out.size()));
    std::vector<double> seconds;
    seconds.reserve(static_cast<size_t>(std::max<int64_t>(calls, 0)));
    ThrowIfError(Run([&](PsClient& c) {
      for (int64_t i = 0; i < calls; ++i) {
        const absl::Span<const uint64_t> id = ids[static_cast<size_t>(i) % ids.size()];
        const absl::Time start = absl::Now();
        absl::Status s = op == "pull"   ? c.PullRows(table, id, rows)
                         : op == "push" ? c.PushRows(table, id, g)
                                        : c.PushPullRows(table, id, g, rows);
        if (!s.ok()) return s;
        seconds.push_back(absl::ToDoubleSeconds(absl::Now() - start));
      }
      return absl::OkStatus();
    }));
    return seconds;
  }

  // A layer-wise push-pull into `out`, and a push-pull of rows into `out`
  // (python/ext/handles.h).
  std::unique_ptr<PushPullHandle> StartPushPull(std::vector<py::array> out) {
    return std::make_unique<PushPullHandle>(this, std::move(out));
  }
  std::unique_ptr<RowsHandle> StartPushPullRows(const std::string& table, const py::array& ids,
                                                const py::array& grads, py::array out) {
    return std::make_unique<RowsHandle>(this, table, ids, grads, std::move(out));
  }

  // Cancels what is in flight and closes the connections; idempotent.
  void Close();
  bool closed() const { return client_ == nullptr; }

  int64_t version() const { return Open().version(); }
  std::string mode() const { return ModeName(Open().mode()); }
  int num_shards() const { return Open().num_shards(); }
  // The servers' tensors, in order: (name, shape) pairs; empty before init.
  std::vector<std::pair<std::string, std::vector<int64_t>>> spec() const {
    std::vector<std::pair<std::string, std::vector<int64_t>>> out;
    for (const TensorSpec& t : Open().spec()) out.emplace_back(t.name, t.shape);
    return out;
  }

  // HandleOwner.
  void Register(Handle* h) override { handles_.insert(h); }
  void Unregister(Handle* h) override { handles_.erase(h); }

 private:
  // The client; ValueError once closed.
  PsClient& Open() const override {
    if (client_ == nullptr) throw py::value_error("the client is closed");
    return *client_;
  }

  // The declared table named `table` (a str); null otherwise. Valid while
  // the client is open and no table is declared (the caller's thread).
  const TableSpec* Declared(const py::object& table) const {
    if (!PyUnicode_Check(table.ptr())) return nullptr;
    Py_ssize_t size = 0;
    const char* name = PyUnicode_AsUTF8AndSize(table.ptr(), &size);  // the str's own buffer
    if (name == nullptr) throw py::error_already_set();
    for (const TableSpec& t : Open().tables()) {
      if (t.name == absl::string_view(name, static_cast<size_t>(size))) return &t;
    }
    return nullptr;
  }

  // A new float32 array of n rows of `dim`.
  static py::object NewRows(size_t n, int dim) {
    return py::array_t<float>({static_cast<py::ssize_t>(n), static_cast<py::ssize_t>(dim)});
  }

  // One new float32 array per tensor of the spec (none before Init).
  std::vector<py::array> NewWeights() const {
    std::vector<py::array> out;
    for (const TensorSpec& t : Open().spec()) out.push_back(py::array_t<float>(t.shape));
    return out;
  }

  // Runs `call` with the client on this thread, GIL released, and returns
  // its status; throws the exception of a signal handler that raised
  // meanwhile (the call was cancelled). The arrays it uses are the caller's
  // arguments, alive until it returns.
  absl::Status Run(const std::function<absl::Status(PsClient&)>& call) override {
    PsClient* client = &Open();
    absl::Status s;
    {
      InFlight::Call in_call(in_flight_.get());  // ended even if the call throws
      py::gil_scoped_release release;
      s = call(*client);
    }
    // close() from a signal handler during the call: destroyed now.
    if (closed_in_call_ != nullptr) {
      py::gil_scoped_release release;
      abandoned_in_call_.clear();
      closed_in_call_.reset();
    }
    if (PyErr_Occurred() != nullptr) throw py::error_already_set();
    return s;
  }

  // close() from another thread, GIL released: cancels the call running,
  // again every 100 ms (it may not have begun its operation at the first),
  // until it ends or kCancelGrace passed; whether it ended.
  bool CancelCall(PsClient* client) {
    const absl::Time deadline = absl::Now() + kCancelGrace;
    absl::MutexLock l(&in_flight_->mu);
    auto ended = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(in_flight_->mu) {
      return in_flight_->calls == 0;
    };
    while (!ended()) {
      client->Cancel();
      in_flight_->mu.AwaitWithTimeout(absl::Condition(&ended),
                                      std::min(absl::Milliseconds(100), deadline - absl::Now()));
      if (!ended() && absl::Now() >= deadline) return false;
    }
    return true;
  }

  std::unique_ptr<PsClient> client_;  // null once closed
  std::set<Handle*> handles_;         // the operations in flight that Python holds
  std::shared_ptr<InFlight> in_flight_ = std::make_shared<InFlight>();
  // close()d by a signal handler during its own call: destroyed after it.
  std::vector<std::shared_ptr<void>> abandoned_in_call_;
  std::unique_ptr<PsClient> closed_in_call_;
  CallThread thread_;  // Connect's; declared last: destroyed first (it never waits)
};

void Client::Close() {
  if (client_ == nullptr) return;
  std::unique_ptr<PsClient> client = std::move(client_);  // calls raise ValueError from now on
  // The operations not waited on: cancelled below.
  std::vector<std::shared_ptr<void>> abandoned;
  for (Handle* h : handles_) {
    if (std::shared_ptr<void> op = h->TakeOp()) abandoned.push_back(std::move(op));
  }
  if (in_flight_->caller.load() == std::this_thread::get_id()) {
    // A signal handler of this thread's own call: cancel it, and destroy the
    // client when the call returns (Run).
    client->Cancel();  // the layer-wise push-pulls too
    abandoned_in_call_ = std::move(abandoned);
    closed_in_call_ = std::move(client);
    return;
  }
  py::gil_scoped_release release;
  if (!CancelCall(client.get())) {
    // Left to finish on its own: what it uses is never freed.
    static_cast<void>(client.release());
    static_cast<void>(new std::vector<std::shared_ptr<void>>(std::move(abandoned)));
    return;
  }
  abandoned.clear();  // cancels their calls and waits for them
  client.reset();     // closes the streams
}

}  // namespace
}  // namespace ps

PYBIND11_MODULE(_ps, m) {
  m.doc() = "The C++ parameter-server client; use it through the `ps` package.";
  ps::SkipMutexDeadlockDetection();  // as the binaries do (common/mutex_checks.h)
  m.def(
      "_register_errors",
      [](const std::map<int, py::object>& classes) {
        ps::error_classes = new std::map<int, py::object>(classes);
      },
      py::arg("classes"), "Sets the exception class for each status code (int -> class).");
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p) std::rethrow_exception(p);
    } catch (const ps::StatusError& e) {
      py::object cls = py::reinterpret_borrow<py::object>(PyExc_RuntimeError);
      if (ps::error_classes != nullptr) {
        auto it = ps::error_classes->find(e.code);
        if (it != ps::error_classes->end()) cls = it->second;
      }
      PyErr_SetObject(cls.ptr(), py::str(e.message).ptr());
    }
  });
  py::class_<ps::PushPullHandle>(m, "PushPullInProgress")
      .def("send", &ps::PushPullHandle::Send, py::arg("index"), py::arg("grad"))
      .def("wait", &ps::PushPullHandle::Wait);
  py::class_<ps::RowsHandle>(m, "PushPullRowsInProgress").def("wait", &ps::RowsHandle::Wait);
  py::class_<ps::JobMember>(m, "JobMember")
      .def(py::init<std::string, std::string, double, int, int, bool, std::string, std::string,
                    std::string, bool, bool>(),
           py::arg("coordinator"), py::arg("job"), py::arg("ttl"), py::arg("worker_id"),
           py::arg("num_workers"), py::arg("find_servers"), py::arg("tls_cert"), py::arg("tls_key"),
           py::arg("tls_ca"), py::arg("insecure"), py::arg("waiting"))
      .def_property_readonly("worker_id", &ps::JobMember::worker_id)
      .def_property_readonly("servers", &ps::JobMember::servers)
      .def_property_readonly("num_workers", &ps::JobMember::num_workers)
      .def("leave", &ps::JobMember::Leave)
      .def("share_at", &ps::JobMember::ShareAt, py::arg("step"), py::arg("examples"),
           py::arg("batch_size"), py::arg("epochs"))
      .def("next_share", &ps::JobMember::NextShare, py::arg("epoch"), py::arg("first_step"),
           py::arg("workers"), py::arg("examples"), py::arg("batch_size"), py::arg("epochs"));
  py::class_<ps::Client>(m, "Client")
      .def(py::init<std::vector<std::string>, int, int, std::string, std::string, std::string,
                    std::string, std::string, bool, std::string, std::string, double, double,
                    double, py::object>(),
           py::arg("servers"), py::arg("worker_id"), py::arg("num_workers"), py::arg("tls_cert"),
           py::arg("tls_key"), py::arg("tls_ca"), py::arg("server_name"),
           py::arg("auth_token_file"), py::arg("insecure"), py::arg("transport"),
           py::arg("wire_dtype"), py::arg("connect_timeout"), py::arg("wait_timeout"),
           py::arg("retry_timeout"), py::arg("follow"))
      .def("init", &ps::Client::Init, py::arg("names"), py::arg("shapes"), py::arg("values"))
      .def("pull", &ps::Client::Pull, py::arg("min_version"), py::arg("out") = py::none())
      .def("push", &ps::Client::Push, py::arg("grads"))
      .def("push_pull", &ps::Client::PushPull, py::arg("grads"), py::arg("out") = py::none())
      .def("declare_tables", &ps::Client::DeclareTables, py::arg("tables"))
      .def("pull_rows", &ps::Client::PullRows, py::arg("table"), py::arg("ids"), py::arg("out"))
      .def("push_rows", &ps::Client::PushRows, py::arg("table"), py::arg("ids"), py::arg("grads"))
      .def("push_pull_rows", &ps::Client::PushPullRows, py::arg("table"), py::arg("ids"),
           py::arg("grads"), py::arg("out"))
      .def("_time_rows", &ps::Client::TimeRows, py::arg("table"), py::arg("requests"),
           py::arg("op"), py::arg("grads"), py::arg("out"), py::arg("calls"))
      .def("start_push_pull", &ps::Client::StartPushPull, py::arg("out"), py::keep_alive<0, 1>())
      .def("start_push_pull_rows", &ps::Client::StartPushPullRows, py::arg("table"), py::arg("ids"),
           py::arg("grads"), py::arg("out"), py::keep_alive<0, 1>())
      .def("close", &ps::Client::Close)
      .def_property_readonly("closed", &ps::Client::closed)
      .def_property_readonly("version", &ps::Client::version)
      .def_property_readonly("mode", &ps::Client::mode)
      .def_property_readonly("num_shards", &ps::Client::num_shards)
      .def_property_readonly("spec", &ps::Client::spec);
}
