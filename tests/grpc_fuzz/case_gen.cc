#include "tests/grpc_fuzz/case_gen.h"

#include <memory>

namespace ps {
namespace grpc_fuzz {

Request CaseGen::Generic(const google::protobuf::Descriptor* d) {
  using google::protobuf::FieldDescriptor;
  std::unique_ptr<google::protobuf::Message> m(
      google::protobuf::MessageFactory::generated_factory()->GetPrototype(d)->New());
  const google::protobuf::Reflection* r = m->GetReflection();
  for (int i = 0; i < d->field_count(); ++i) {
    const FieldDescriptor* f = d->field(i);
    if (f->is_repeated()) continue;
    int64_t v;
    auto hinted = h_->hints.ints.find(f->full_name());
    if (f->name() == "worker_id") {
      v = Worker();
    } else if (hinted != h_->hints.ints.end() && !hinted->second.empty()) {
      v = fz_.Pick(hinted->second);
    } else {
      continue;
    }
    switch (f->cpp_type()) {
      case FieldDescriptor::CPPTYPE_INT32:
        r->SetInt32(m.get(), f, static_cast<int32_t>(v));
        break;
      case FieldDescriptor::CPPTYPE_INT64:
        r->SetInt64(m.get(), f, v);
        break;
      case FieldDescriptor::CPPTYPE_UINT32:
        r->SetUInt32(m.get(), f, static_cast<uint32_t>(v));
        break;
      case FieldDescriptor::CPPTYPE_UINT64:
        r->SetUInt64(m.get(), f, static_cast<uint64_t>(v));
        break;
      default:
        break;
    }
  }
  return Encode(*m, false);
}

}  // namespace grpc_fuzz
}  // namespace ps
