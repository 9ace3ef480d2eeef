// ProtoFuzzer's value pools: extremes per field type, random strings and
// contents, damaged bytes (tests/proto_fuzzer.h).
#include <algorithm>
#include <cstring>
#include <limits>

#include "tests/proto_fuzzer.h"
#include "tests/proto_fuzzer_wire.h"

namespace ps {

using google::protobuf::Descriptor;
using google::protobuf::FieldDescriptor;
using google::protobuf::Message;
using google::protobuf::Reflection;
using namespace proto_fuzzer_internal;  // NOLINT: this library's own helpers

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

}  // namespace ps
