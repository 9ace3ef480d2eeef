#include "tests/proto_fuzzer.h"

#include <algorithm>
#include <cstring>
#include <limits>

#include "tests/proto_fuzzer_wire.h"

namespace ps {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;

void AppendVarint(uint64_t v, std::string* out) {
  while (v >= 0x80) {
    out->push_back(static_cast<char>(v | 0x80));
    v >>= 7;
  }
  out->push_back(static_cast<char>(v));
}

void AppendTag(int field, int wire_type, std::string* out) {
  AppendVarint((static_cast<uint64_t>(field) << 3) | static_cast<uint64_t>(wire_type), out);
}

void AppendLengthDelimited(int field, absl::string_view content, std::string* out) {
  AppendTag(field, kWireLen, out);
  AppendVarint(content.size(), out);
  out->append(content.data(), content.size());
}

using namespace proto_fuzzer_internal;  // NOLINT: this library's own helpers

uint64_t ProtoFuzzer::ScalarBits(const Message& m, const FieldDescriptor* f, int index) {
  const Reflection* r = m.GetReflection();
  const bool rep = index >= 0;
  switch (f->cpp_type()) {
    case FieldDescriptor::CPPTYPE_INT32:
      return IntBits(f, rep ? r->GetRepeatedInt32(m, f, index) : r->GetInt32(m, f));
    case FieldDescriptor::CPPTYPE_INT64:
      return IntBits(f, rep ? r->GetRepeatedInt64(m, f, index) : r->GetInt64(m, f));
    case FieldDescriptor::CPPTYPE_UINT32:
      return rep ? r->GetRepeatedUInt32(m, f, index) : r->GetUInt32(m, f);
    case FieldDescriptor::CPPTYPE_UINT64:
      return rep ? r->GetRepeatedUInt64(m, f, index) : r->GetUInt64(m, f);
    case FieldDescriptor::CPPTYPE_BOOL:
      return rep ? r->GetRepeatedBool(m, f, index) : r->GetBool(m, f);
    case FieldDescriptor::CPPTYPE_ENUM:
      return IntBits(f, rep ? r->GetRepeatedEnumValue(m, f, index) : r->GetEnumValue(m, f));
    case FieldDescriptor::CPPTYPE_FLOAT:
      return BitsOf(rep ? r->GetRepeatedFloat(m, f, index) : r->GetFloat(m, f));
    case FieldDescriptor::CPPTYPE_DOUBLE:
      return BitsOf(rep ? r->GetRepeatedDouble(m, f, index) : r->GetDouble(m, f));
    default:
      return 0;  // not a scalar
  }
}

std::string ProtoFuzzer::Content(const Message& m, const FieldDescriptor* f, int index, double rate,
                                 int depth) {
  const Reflection* r = m.GetReflection();
  if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
    const Message& sub = index >= 0 ? r->GetRepeatedMessage(m, f, index) : r->GetMessage(m, f);
    std::string s;
    EncodeMessage(sub, rate, depth + 1, &s);
    return s;
  }
  return index >= 0 ? r->GetRepeatedString(m, f, index) : r->GetString(m, f);
}

void ProtoFuzzer::EmitScalar(const FieldDescriptor* f, uint64_t bits, bool mutate,
                             std::string* out) {
  const int wt = WireTypeOf(f);
  AppendTag(f->number(), wt, out);
  if (wt == kWireFixed32) return AppendFixed(bits, 4, out);
  if (wt == kWireFixed64) return AppendFixed(bits, 8, out);
  if (mutate && Chance(0.3)) {
    if (Chance(0.5)) {
      // Eleven bytes: longer than any varint.
      out->append(10, '\xff');
      out->push_back('\x01');
    } else {
      // The same value padded to ten bytes (valid, but not the usual form).
      for (int i = 0; i < 9; ++i) {
        out->push_back(static_cast<char>((bits & 0x7f) | 0x80));
        bits >>= 7;
      }
      out->push_back(static_cast<char>(bits & 0x01));
    }
    return;
  }
  AppendVarint(bits, out);
}

void ProtoFuzzer::EmitContent(const FieldDescriptor* f, std::string content, bool mutate, int depth,
                              std::string* out) {
  uint64_t declared = content.size();
  if (mutate) {
    switch (Uniform(6)) {
      case 0:
      case 1:
      case 2:  // different content
        content = f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE
                      ? (Chance(0.5) ? Garble(std::move(content)) : RandomContent(f, depth))
                      : MutateBytes(f, std::move(content));
        declared = content.size();
        break;
      case 3: {  // the length prefix claims more than follows
        static const std::vector<uint64_t> kHuge = {uint64_t{1} << 31, uint64_t{1} << 32,
                                                    (uint64_t{1} << 63) - 1, ~uint64_t{0}};
        declared = Chance(0.5) ? content.size() + 1 + Uniform(8) : Pick(kHuge);
        break;
      }
      case 4:  // ... or less: the rest is read as the parent's fields
        if (!content.empty()) declared = Uniform(content.size());
        break;
      default:  // the content's own fields mutated deeper down
        if (f->cpp_type() == FieldDescriptor::CPPTYPE_MESSAGE) {
          content = Garble(std::move(content));
          declared = content.size();
        }
        break;
    }
  }
  AppendTag(f->number(), kWireLen, out);
  AppendVarint(declared, out);
  out->append(content);
}

void ProtoFuzzer::EmitRandom(const FieldDescriptor* f, int depth, std::string* out) {
  if (WireTypeOf(f) == kWireLen) {
    EmitContent(f, RandomContent(f, depth), Chance(0.1), depth, out);
  } else {
    EmitScalar(f, RandomScalarBits(f), Chance(0.1), out);
  }
}

void ProtoFuzzer::EmitWrongWireType(const FieldDescriptor* f, std::string* out) {
  static const std::vector<int> kTypes = {kWireVarint,     kWireFixed64,  kWireLen,
                                          kWireStartGroup, kWireEndGroup, kWireFixed32};
  int wt = Pick(kTypes);
  if (wt == WireTypeOf(f)) wt = wt == kWireLen ? kWireVarint : kWireLen;
  AppendTag(f->number(), wt, out);
  switch (wt) {
    case kWireVarint:
      AppendVarint(rng_(), out);
      break;
    case kWireFixed64:
      AppendFixed(rng_(), 8, out);
      break;
    case kWireFixed32:
      AppendFixed(rng_(), 4, out);
      break;
    case kWireLen: {
      std::string s(Uniform(16), '\0');
      for (char& c : s) c = static_cast<char>(rng_());
      AppendVarint(s.size(), out);
      out->append(s);
      break;
    }
    default:
      break;  // a group start or end, with nothing around it
  }
}

void ProtoFuzzer::EmitUnknownField(std::string* out) {
  static const std::vector<int> kNumbers = {15, 16, 100, 2047, 19000, 536870911};
  const int number = Pick(kNumbers);
  switch (Uniform(3)) {
    case 0:
      AppendTag(number, kWireVarint, out);
      AppendVarint(rng_(), out);
      break;
    case 1:
      AppendTag(number, kWireFixed32, out);
      AppendFixed(rng_(), 4, out);
      break;
    default:
      AppendLengthDelimited(number, std::string(Uniform(32), 'u'), out);
      break;
  }
}

void ProtoFuzzer::EncodeSingular(const Message& m, const FieldDescriptor* f, double rate, int depth,
                                 std::string* out) {
  const bool present = m.GetReflection()->HasField(m, f);
  const bool len = WireTypeOf(f) == kWireLen;
  auto emit_valid = [&] {
    if (len) {
      EmitContent(f, Content(m, f, -1, rate, depth), false, depth, out);
    } else {
      EmitScalar(f, ScalarBits(m, f, -1), false, out);
    }
  };
  if (!Chance(rate)) {
    if (present) emit_valid();
    return;
  }
  changed_ = true;
  switch (Uniform(8)) {
    case 0:  // left out
      return;
    case 1:
      EmitWrongWireType(f, out);
      return;
    case 2:  // sent twice: scalars keep the last, messages merge
      if (present) emit_valid();
      EmitRandom(f, depth, out);
      return;
    case 3:
    case 4:  // the value damaged rather than replaced
      if (present && len) {
        EmitContent(f, Content(m, f, -1, std::min(1.0, rate + 0.2), depth), true, depth, out);
        return;
      }
      [[fallthrough]];
    default:
      EmitRandom(f, depth, out);
  }
}

void ProtoFuzzer::EncodeRepeated(const Message& m, const FieldDescriptor* f, double rate, int depth,
                                 std::string* out) {
  const int n = m.GetReflection()->FieldSize(m, f);
  if (WireTypeOf(f) != kWireLen) {
    // Scalars: proto3 packs them into one length-delimited field.
    std::vector<uint64_t> bits;
    for (int i = 0; i < n; ++i) bits.push_back(ScalarBits(m, f, i));
    bool unpacked = false, cut = false;
    if (Chance(rate)) {
      changed_ = true;
      switch (Uniform(7)) {
        case 0:  // some elements replaced
          for (uint64_t& b : bits) {
            if (Chance(0.5)) b = RandomScalarBits(f);
          }
          break;
        case 1:  // more elements, up to many
          for (int i = Chance(0.2) ? 1000 : 1 + Uniform(3); i > 0; --i)
            bits.push_back(RandomScalarBits(f));
          break;
        case 2:  // one fewer
          if (!bits.empty()) bits.erase(bits.begin() + Uniform(bits.size()));
          break;
        case 3:  // unpacked: one tag per element (also valid protobuf)
          unpacked = true;
          break;
        case 4:  // the packed run ends inside a varint
          cut = true;
          break;
        case 5:  // no elements, but the field is there
          bits.clear();
          AppendLengthDelimited(f->number(), "", out);
          return;
        default:  // left out
          return;
      }
    }
    if (unpacked) {
      for (uint64_t b : bits) EmitScalar(f, b, false, out);
      return;
    }
    if (bits.empty() && !cut) return;
    std::string packed;
    const int wt = WireTypeOf(f);
    for (uint64_t b : bits) {
      if (wt == kWireFixed32)
        AppendFixed(b, 4, &packed);
      else if (wt == kWireFixed64)
        AppendFixed(b, 8, &packed);
      else
        AppendVarint(b, &packed);
    }
    if (cut) packed.push_back('\x80');
    AppendLengthDelimited(f->number(), packed, out);
    return;
  }
  // Strings, bytes and messages: one field per element.
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  if (n > 1 && Chance(rate / 4)) {
    changed_ = true;
    std::shuffle(order.begin(), order.end(), rng_);
  }
  for (int i : order) {
    if (!Chance(rate)) {
      EmitContent(f, Content(m, f, i, rate, depth), false, depth, out);
      continue;
    }
    changed_ = true;
    switch (Uniform(5)) {
      case 0:  // left out
        break;
      case 1:  // twice
        EmitContent(f, Content(m, f, i, rate, depth), false, depth, out);
        EmitContent(f, Content(m, f, i, rate, depth), false, depth, out);
        break;
      case 2:
        EmitWrongWireType(f, out);
        break;
      case 3:
        EmitRandom(f, depth, out);
        break;
      default:
        EmitContent(f, Content(m, f, i, std::min(1.0, rate + 0.2), depth), true, depth, out);
        break;
    }
  }
  if (Chance(rate / 2)) {
    changed_ = true;
    for (int i = 1 + Uniform(3); i > 0; --i) EmitRandom(f, depth, out);
  }
}

void ProtoFuzzer::EncodeMessage(const Message& m, double rate, int depth, std::string* out) {
  const Descriptor* d = m.GetDescriptor();
  std::vector<const FieldDescriptor*> fields;
  for (int i = 0; i < d->field_count(); ++i) fields.push_back(d->field(i));
  // Field order is free on the wire; parsers must not depend on it.
  if (Chance(rate / 4)) std::shuffle(fields.begin(), fields.end(), rng_);
  for (const FieldDescriptor* f : fields) {
    if (f->is_repeated()) {
      EncodeRepeated(m, f, rate, depth, out);
    } else {
      EncodeSingular(m, f, rate, depth, out);
    }
  }
  if (Chance(rate / 8)) {
    changed_ = true;
    EmitUnknownField(out);
  }
}

std::string ProtoFuzzer::Mutate(const Message& valid, double rate) {
  changed_ = false;
  std::string out;
  EncodeMessage(valid, rate, 0, &out);
  return out;
}

std::string ProtoFuzzer::Random(const Descriptor* d) {
  return Mutate(*factory_.GetPrototype(d), 1.0);
}

}  // namespace ps
