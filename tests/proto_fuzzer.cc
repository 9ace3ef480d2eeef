#include "tests/proto_fuzzer.h"

#include <algorithm>
#include <cstring>
#include <limits>

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

namespace {

constexpr int kMaxDepth = 4;  // nesting of random sub-messages

void AppendFixed(uint64_t bits, int bytes, std::string* out) {
  for (int i = 0; i < bytes; ++i) out->push_back(static_cast<char>(bits >> (8 * i)));
}

int WireTypeOf(const FieldDescriptor* f) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_FLOAT:
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
      return kWireFixed32;
    case FieldDescriptor::TYPE_DOUBLE:
    case FieldDescriptor::TYPE_FIXED64:
    case FieldDescriptor::TYPE_SFIXED64:
      return kWireFixed64;
    case FieldDescriptor::TYPE_STRING:
    case FieldDescriptor::TYPE_BYTES:
    case FieldDescriptor::TYPE_MESSAGE:
      return kWireLen;
    case FieldDescriptor::TYPE_GROUP:
      return kWireStartGroup;  // not in proto3; never generated here
    default:
      return kWireVarint;
  }
}

uint64_t ZigZag(int64_t v) {
  return (static_cast<uint64_t>(v) << 1) ^ static_cast<uint64_t>(v >> 63);
}

// The wire bits of integer `v` in a field of `f`'s type. Values outside the
// type's range are kept on purpose for varint types (a peer may send them).
uint64_t IntBits(const FieldDescriptor* f, int64_t v) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SINT64:
      return ZigZag(v);
    case FieldDescriptor::TYPE_FIXED32:
    case FieldDescriptor::TYPE_SFIXED32:
      return static_cast<uint32_t>(v);
    default:
      return static_cast<uint64_t>(v);
  }
}

template <typename T>
uint64_t BitsOf(T v) {
  uint64_t bits = 0;
  std::memcpy(&bits, &v, sizeof(T));
  return bits;
}

}  // namespace

ProtoFuzzer::ProtoFuzzer(uint64_t seed, const FieldHints* hints) : rng_(seed), hints_(hints) {}

bool ProtoFuzzer::Chance(double p) {
  if (p <= 0) return false;
  if (p >= 1) return true;
  return std::uniform_real_distribution<double>(0, 1)(rng_) < p;
}

int ProtoFuzzer::Uniform(int n) { return std::uniform_int_distribution<int>(0, n - 1)(rng_); }

int64_t ProtoFuzzer::ExtremeInt64() {
  constexpr int64_t kMin = std::numeric_limits<int64_t>::min();
  constexpr int64_t kMax = std::numeric_limits<int64_t>::max();
  static const std::vector<int64_t> kPool = {0,
                                             1,
                                             -1,
                                             2,
                                             kMin,
                                             kMax,
                                             kMin + 1,
                                             kMax - 1,
                                             int64_t{1} << 62,
                                             (int64_t{1} << 62) + 1,
                                             int64_t{1} << 32,
                                             (int64_t{1} << 32) - 1,
                                             std::numeric_limits<int32_t>::max(),
                                             std::numeric_limits<int32_t>::min(),
                                             int64_t{1} << 31,
                                             int64_t{1} << 40,
                                             (int64_t{1} << 40) + 1};
  switch (Uniform(4)) {
    case 0:
      return std::uniform_int_distribution<int64_t>(-100, 100)(rng_);
    case 1:
      return static_cast<int64_t>(rng_());
    default:
      return Pick(kPool);
  }
}

uint32_t ProtoFuzzer::RandomFloatBits() {
  static const std::vector<uint32_t> kPool = {
      0x7fc00000u,               // quiet NaN
      0xffc00000u,               // -NaN
      0x7f800001u,               // signalling NaN
      0x7f800000u,               // +Inf
      0xff800000u,               // -Inf
      0x00000000u, 0x80000000u,  // +-0
      0x00000001u,               // smallest denormal
      0x7f7fffffu, 0xff7fffffu,  // +-FLT_MAX
      0x3f800000u,               // 1
  };
  return Chance(0.2) ? static_cast<uint32_t>(rng_()) : Pick(kPool);
}

uint64_t ProtoFuzzer::RandomDoubleBits() {
  static const std::vector<double> kPool = {std::numeric_limits<double>::quiet_NaN(),
                                            -std::numeric_limits<double>::quiet_NaN(),
                                            std::numeric_limits<double>::infinity(),
                                            -std::numeric_limits<double>::infinity(),
                                            0.0,
                                            -0.0,
                                            std::numeric_limits<double>::denorm_min(),
                                            std::numeric_limits<double>::max(),
                                            -std::numeric_limits<double>::max(),
                                            1.0};
  return Chance(0.2) ? rng_() : BitsOf(Pick(kPool));
}

uint64_t ProtoFuzzer::RandomScalarBits(const FieldDescriptor* f) {
  auto hint = hints_->ints.find(f->full_name());
  if (hint != hints_->ints.end() && !hint->second.empty() && Chance(0.5)) {
    return IntBits(f, Pick(hint->second));
  }
  switch (f->type()) {
    case FieldDescriptor::TYPE_FLOAT:
      return RandomFloatBits();
    case FieldDescriptor::TYPE_DOUBLE:
      return RandomDoubleBits();
    case FieldDescriptor::TYPE_BOOL: {
      static const std::vector<uint64_t> kPool = {0, 1, 2, 255, ~uint64_t{0}};
      return Pick(kPool);
    }
    case FieldDescriptor::TYPE_ENUM: {
      const auto* e = f->enum_type();
      if (Chance(0.5)) return IntBits(f, e->value(Uniform(e->value_count()))->number());
      static const std::vector<int64_t> kOutside = {-1, 3, 100, std::numeric_limits<int32_t>::max(),
                                                    std::numeric_limits<int32_t>::min()};
      return IntBits(f, Pick(kOutside));
    }
    case FieldDescriptor::TYPE_INT32:
    case FieldDescriptor::TYPE_SINT32:
    case FieldDescriptor::TYPE_SFIXED32: {
      // Mostly int32 values; sometimes a 64-bit one the field cannot hold.
      if (Chance(0.15)) return IntBits(f, ExtremeInt64());
      static const std::vector<int64_t> kPool = {0,
                                                 1,
                                                 -1,
                                                 2,
                                                 std::numeric_limits<int32_t>::min(),
                                                 std::numeric_limits<int32_t>::max(),
                                                 std::numeric_limits<int32_t>::min() + 1};
      return IntBits(
          f, Chance(0.3) ? std::uniform_int_distribution<int64_t>(-1000, 1000)(rng_) : Pick(kPool));
    }
    case FieldDescriptor::TYPE_UINT32:
    case FieldDescriptor::TYPE_FIXED32: {
      static const std::vector<uint64_t> kPool = {0, 1, 2, 0xffffffffu, 0x80000000u};
      return Chance(0.2) ? static_cast<uint32_t>(rng_()) : Pick(kPool);
    }
    case FieldDescriptor::TYPE_UINT64:
    case FieldDescriptor::TYPE_FIXED64: {
      static const std::vector<uint64_t> kPool = {
          0, 1, 2, ~uint64_t{0}, uint64_t{1} << 63, (uint64_t{1} << 63) - 1, uint64_t{1} << 32};
      return Chance(0.2) ? rng_() : Pick(kPool);
    }
    default:  // INT64, SINT64, SFIXED64
      return IntBits(f, ExtremeInt64());
  }
}

std::string ProtoFuzzer::RandomString(const FieldDescriptor* f) {
  auto hint = hints_->strings.find(f->full_name());
  const bool hinted = hint != hints_->strings.end() && !hint->second.empty();
  if (hinted && Chance(0.5)) {
    std::string s = Pick(hint->second);
    switch (Uniform(5)) {
      case 0:
        return s + std::string(1, '\0') + "x";  // embedded NUL
      case 1:
        return s + " ";
      case 2:
        return s.empty() ? s : s.substr(0, s.size() - 1);
      default:
        return s;
    }
  }
  switch (Uniform(8)) {
    case 0:
      return "";
    case 1:
      return "\xc3\x28";  // invalid UTF-8 (bad continuation byte)
    case 2:
      return "\xff\xfe\xfd";  // invalid UTF-8
    case 3:
      return std::string(Chance(0.1) ? (1 << 20) : (1 << 16), 'x');
    default: {
      std::string s(1 + Uniform(24), ' ');
      for (char& c : s) c = static_cast<char>(' ' + Uniform(95));
      return s;
    }
  }
}

std::string ProtoFuzzer::RandomContent(const FieldDescriptor* f, int depth) {
  switch (f->type()) {
    case FieldDescriptor::TYPE_STRING:
      return RandomString(f);
    case FieldDescriptor::TYPE_BYTES: {
      if (Chance(0.2)) return RandomString(f);
      std::string s(Uniform(4) == 0 ? Uniform(1 << 16) : Uniform(64), '\0');
      for (char& c : s) c = static_cast<char>(rng_());
      return hints_->float_data.contains(f->full_name()) ? MutateBytes(f, std::move(s)) : s;
    }
    default: {  // a message
      if (depth >= kMaxDepth) return "";
      if (Chance(0.15)) return NotProtobuf();
      std::string s;
      EncodeMessage(*factory_.GetPrototype(f->message_type()), 1.0, depth + 1, &s);
      return s;
    }
  }
}

std::string ProtoFuzzer::MutateBytes(const FieldDescriptor* f, std::string v) {
  const bool floats = hints_->float_data.contains(f->full_name());
  switch (Uniform(floats ? 8 : 6)) {
    case 0:  // cut short
      if (!v.empty())
        v.resize(Chance(0.5) ? v.size() - 1 - Uniform(std::min<int>(3, v.size()))
                             : Uniform(v.size()));
      return v;
    case 1:  // a few bytes too many
      for (int i = 1 + Uniform(7); i > 0; --i) v.push_back(static_cast<char>(rng_()));
      return v;
    case 2: {  // whole elements too many, up to 1 MiB
      static const std::vector<size_t> kExtra = {4, 4000, 1 << 20};
      v.append(Pick(kExtra), '\0');
      return v;
    }
    case 3:
      return "";
    case 4:
      v += v;
      return v;
    case 5:  // overwrite a few bytes
      // In float data, only the low three bytes of an element (mantissa and
      // the exponent's lowest bit): a value within a factor of two of a
      // valid one. Random high bytes make finite values up to 3e38, which an
      // async shard rightly applies; the real workers that train after the
      // fuzzing then overflow on those weights, whichever of the pushes the
      // timing let through. Non-finite values have their own case below.
      for (int i = 1 + Uniform(8); i > 0 && !v.empty(); --i) {
        size_t at = Uniform(v.size());
        if (floats && at % 4 == 3) --at;
        v[at] = static_cast<char>(rng_());
      }
      return v;
    default: {  // NaN or +-Inf at element boundaries
      static const std::vector<uint32_t> kNonFinite = {0x7fc00000u, 0xffc00000u, 0x7f800001u,
                                                       0x7f800000u, 0xff800000u};
      if (v.size() < 4) return std::string(reinterpret_cast<const char*>(&kNonFinite[0]), 4);
      for (int i = 1 + Uniform(4); i > 0; --i) {
        const uint32_t bits = Pick(kNonFinite);
        std::memcpy(&v[4 * Uniform(v.size() / 4)], &bits, 4);
      }
      return v;
    }
  }
}

std::string ProtoFuzzer::Garble(std::string bytes) {
  const std::string before = bytes;
  switch (bytes.empty() ? 2 : Uniform(5)) {
    case 0:  // truncated
      bytes.resize(Uniform(bytes.size()));
      break;
    case 1:  // bytes flipped
      for (int i = 1 + Uniform(8); i > 0; --i) {
        bytes[Uniform(std::min<size_t>(bytes.size(), Chance(0.5) ? 64 : bytes.size()))] ^=
            static_cast<char>(1 + Uniform(255));
      }
      break;
    case 2:  // trailing junk
      for (int i = 1 + Uniform(16); i > 0; --i) bytes.push_back(static_cast<char>(rng_()));
      break;
    case 3: {  // junk inserted
      std::string junk(1 + Uniform(8), '\0');
      for (char& c : junk) c = static_cast<char>(rng_());
      bytes.insert(Uniform(bytes.size() + 1), junk);
      break;
    }
    default:  // a broken first tag: field 0 or wire type 7
      bytes.insert(0, 1, Chance(0.5) ? '\x07' : '\x0f');
      break;
  }
  if (bytes == before) bytes.push_back('\x07');  // field 0: never valid
  return bytes;
}

std::string ProtoFuzzer::NotProtobuf() {
  // Broken at the first tag, whatever follows.
  static const std::vector<std::string> kBrokenStart = {
      std::string(1, '\0'),                            // field number 0
      "\x07",                                          // field 0, wire type 7
      "\x0f",                                          // wire type 7
      "\x0e",                                          // wire type 6
      "\xff\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01",  // an 11-byte varint tag
      "\x0c",                                          // a group's end, none started
  };
  // Broken because nothing (or too little) follows.
  static const std::vector<std::string> kBrokenEnd = {
      "\x0a\xff\xff\xff\xff\x0f",  // 4 GiB declared, none sent
      "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\x7f"
      "abcd",  // 2^63-1 declared
      "\x0a\xff\xff\xff\xff\xff\xff\xff\xff\xff\x01"
      "abcd",          // 2^64-1 declared
      "\x0b",          // a group never ended
      "\x08",          // a tag, then no varint
      "\x08\xff\xff",  // an unterminated varint
      "\x0d\x01\x02",  // fixed32 cut short
  };
  if (Chance(0.5)) return Pick(kBrokenEnd);
  std::string s = Pick(kBrokenStart);
  for (int i = Chance(0.5) ? Uniform(64) : 0; i > 0; --i) s.push_back(static_cast<char>(rng_()));
  return s;
}

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
