#include "tests/hostile_load.h"

#include <utility>

#include "rpc/credentials.h"

namespace ps {

HostileLoad::HostileLoad(std::string server, int per_channel)
    : server_(std::move(server)), per_channel_(per_channel) {}

v1::ParameterServer::Stub* HostileLoad::StubFor(int call) {
  const size_t c = call / per_channel_;
  while (stubs_.size() <= c) {
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);  // a connection each
    stubs_.push_back(v1::ParameterServer::NewStub(
        grpc::CreateCustomChannel(server_, MakeChannelCredentials(), args)));
  }
  return stubs_[c].get();
}

void HostileLoad::SilentPushes(int count) {
  // A valid first chunk of fc1.weight (1 MB), then nothing.
  v1::StreamRequest req;
  req.set_call_id(1);
  req.set_kind(v1::CALL_PUSH);
  v1::TensorSlice* s = req.add_gradients();
  s->set_name("fc1.weight");
  s->add_shape(784);
  s->add_shape(512);
  s->set_length(1 << 18);
  s->set_data(std::string(1 << 20, '\0'));
  for (int i = 0; i < count; ++i) {
    contexts_.push_back(std::make_unique<grpc::ClientContext>());
    streams_.push_back(StubFor(i)->Stream(contexts_.back().get()));
    streams_.back()->Write(req);
  }
}

void HostileLoad::WaitingPulls(int count) {
  for (int i = 0; i < count; ++i) {
    contexts_.push_back(std::make_unique<grpc::ClientContext>());
    pull_replies_.push_back(std::make_unique<v1::PullResponse>());
    v1::PullRequest req;
    req.set_min_version(1);  // worker 1 never pushes: waits until --pull_timeout
    StubFor(i)->async()->Pull(contexts_.back().get(), &req, pull_replies_.back().get(),
                              [this](grpc::Status st) {
                                absl::MutexLock l(&mu_);
                                ++codes_[st.error_code()];
                                ++answered_;
                              });
  }
}

grpc::Status HostileLoad::HugeInit() {
  v1::InitRequest req;
  v1::TensorSpec* t = req.mutable_spec()->add_tensors();
  t->set_name("huge");
  t->add_shape(1 << 28);  // 1 GiB of float32
  v1::TensorSlice* v = req.add_values();
  v->set_name("huge");
  v->add_shape(1 << 28);
  v->set_length(1 << 28);
  v->set_data(std::string(4 << 20, '\0'));  // 4 MB of the declared 1 GiB
  grpc::ClientContext ctx;
  v1::InitResponse resp;
  return StubFor(0)->InitParams(&ctx, req, &resp);
}

int HostileLoad::Answered(std::map<int, int>* codes) const {
  absl::MutexLock l(&mu_);
  if (codes != nullptr) *codes = codes_;
  return answered_;
}

void HostileLoad::Cancel() {
  for (auto& c : contexts_) c->TryCancel();
}

}  // namespace ps
