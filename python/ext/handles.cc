#include "python/ext/handles.h"

#include <utility>

namespace ps {

void Handle::Finish(const std::function<absl::Status()>& wait) {
  const absl::Status s = owner_->Run([&wait](PsClient&) { return wait(); });
  keep_.clear();
  ThrowIfError(s);
}

PushPullHandle::PushPullHandle(HandleOwner* owner, std::vector<py::array> out) : Handle(owner) {
  keep_.assign(out.begin(), out.end());
  auto views = MutableViews(out);
  PsClient* c = &owner_->Open();
  {
    py::gil_scoped_release release;
    p_ = c->StartPushPull(views);
  }
  owner_->Register(this);
}

PushPullHandle::~PushPullHandle() {
  owner_->Unregister(this);
  if (p_) {
    py::gil_scoped_release release;
    p_.reset();  // cancels and waits
  }
}

void PushPullHandle::Send(int index, const py::array& grad) {
  owner_->Open();
  if (!p_) throw py::value_error("send after wait");
  const float* data = FloatData(grad, "tensor " + std::to_string(index), /*write=*/false);
  keep_.push_back(grad);
  py::gil_scoped_release release;
  p_->Send(index, absl::Span<const float>(data, static_cast<size_t>(grad.size())));
}

void PushPullHandle::Wait() {
  owner_->Open();
  if (!p_) throw py::value_error("wait called twice");
  std::shared_ptr<PushPullInProgress> p = std::move(p_);
  Finish([&p] { return p->Wait(); });
}

RowsHandle::RowsHandle(HandleOwner* owner, const std::string& table, const py::array& ids,
                       const py::array& grads, py::array out)
    : Handle(owner), out_(out) {
  const absl::Span<const uint64_t> id = IdData(ids, table);
  const float* gp = FloatData(grads, "gradient rows of table '" + table + "'", /*write=*/false);
  const absl::Span<const float> g(gp, static_cast<size_t>(grads.size()));
  float* p = const_cast<float*>(FloatData(out, "rows of table '" + table + "'", /*write=*/true));
  const absl::Span<float> rows(p, static_cast<size_t>(out.size()));
  std::unique_ptr<PendingOp> op;
  // Sync pushes the rows first: interruptible as any call.
  ThrowIfError(owner_->Run([&](PsClient& c) {
    op = c.PushPullRowsAsync(table, id, g, rows);
    return absl::OkStatus();
  }));
  op_ = std::move(op);
  owner_->Register(this);
}

RowsHandle::~RowsHandle() {
  owner_->Unregister(this);
  if (op_) {
    py::gil_scoped_release release;
    op_.reset();  // cancels and waits
  }
}

py::array RowsHandle::Wait() {
  owner_->Open();
  if (!op_) throw py::value_error("wait called twice");
  std::shared_ptr<PendingOp> op = std::move(op_);
  Finish([&op] { return op->Wait(); });
  return out_;
}

}  // namespace ps
