// The handles of client operations in flight that the `ps` extension
// (python/ext/ps_module.cc) gives Python: a layer-wise push-pull
// (PushPullHandle: each gradient sent as soon as it is final, the weights
// in the arrays it started with once wait() returns) and a push-pull of
// embedding rows (RowsHandle: PsClient::PushPullRowsAsync, the rows in its
// `out` once wait() returns).
//
// A handle belongs to its HandleOwner (the Python Client, kept alive by
// py::keep_alive) and is for the owner's thread, with the GIL held. It
// holds the arrays the operation reads or writes until wait() returns, and
// is registered with the owner while it lives, so that closing the client
// takes the operation not waited on (TakeOp) and cancels it. Destroying a
// handle not waited on cancels its operation and waits for its calls.
#ifndef PS_PYTHON_EXT_HANDLES_H_
#define PS_PYTHON_EXT_HANDLES_H_

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "client/pending_op.h"
#include "client/ps_client.h"
#include "python/ext/arrays.h"

namespace ps {

class Handle;

// Raises the package's exception for a failed status (ps_module.cc).
void ThrowIfError(const absl::Status& s);

// What a handle needs of its client.
class HandleOwner {
 public:
  virtual ~HandleOwner() = default;
  // The client; ValueError once closed.
  virtual PsClient& Open() const = 0;
  // Runs `call` with the client, GIL released, interruptible (Ctrl-C
  // cancels it and raises); its status.
  virtual absl::Status Run(const std::function<absl::Status(PsClient&)>& call) = 0;
  virtual void Register(Handle* h) = 0;
  virtual void Unregister(Handle* h) = 0;
};

class Handle {
 public:
  explicit Handle(HandleOwner* owner) : owner_(owner) {}
  virtual ~Handle() = default;
  Handle(const Handle&) = delete;
  Handle& operator=(const Handle&) = delete;

  // The operation not waited on (null if none), for the owner's close: it
  // is cancelled, and its calls waited for, when the last reference goes.
  virtual std::shared_ptr<void> TakeOp() = 0;

 protected:
  // Waits for `op` through the owner's Run, then lets the arrays go and
  // raises the error, if any.
  void Finish(const std::function<absl::Status()>& wait);

  HandleOwner* const owner_;
  KeepAlive keep_;
};

class PushPullHandle final : public Handle {
 public:
  PushPullHandle(HandleOwner* owner, std::vector<py::array> out);
  ~PushPullHandle() override;

  // Sends tensor `index` (spec order) from `grad`, which must stay unchanged
  // until wait() returns. Errors (a tensor sent twice, a wrong size) come
  // from wait().
  void Send(int index, const py::array& grad);
  // Waits for the new weights.
  void Wait();
  std::shared_ptr<void> TakeOp() override { return std::move(p_); }

 private:
  std::shared_ptr<PushPullInProgress> p_;  // null once waited on
};

class RowsHandle final : public Handle {
 public:
  // Starts PushPullRowsAsync of `ids` (uint64) and `grads` (float32), both
  // read before it returns; the rows go to `out` (float32, ids.size() *
  // dim). In sync mode this pushes the rows first, blocking; its errors
  // come from wait().
  RowsHandle(HandleOwner* owner, const std::string& table, const py::array& ids,
             const py::array& grads, py::array out);
  ~RowsHandle() override;

  // Waits for the rows; returns `out`.
  py::array Wait();
  std::shared_ptr<void> TakeOp() override { return std::move(op_); }

 private:
  py::array out_;
  std::shared_ptr<PendingOp> op_;  // null once waited on
};

}  // namespace ps

#endif  // PS_PYTHON_EXT_HANDLES_H_
