#include "worker/ctr/reader.h"

#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "worker/ctr/det_math.h"

namespace ps {
namespace {

constexpr int kCriteoFields = 1 + kCtrDense + kCtrCategorical;  // 40

absl::Status LineError(absl::string_view what) { return absl::InvalidArgumentError(what); }

uint64_t NotMissing(uint64_t raw) {
  raw &= kRawIdMask;
  return raw == kMissingRawId ? raw - 1 : raw;
}

float SignedLog1p(double x) {
  return static_cast<float>(x >= 0 ? std::log1p(x) : -std::log1p(-x));
}

void SetAllMissing(CtrExample* e) {
  *e = CtrExample();
  for (int f = 0; f < kCtrCategorical; ++f) e->ids[f] = CtrFeatureId(f, kMissingRawId);
}

}  // namespace

uint64_t CtrTokenRawId(absl::string_view token) {
  uint64_t h = 0xcbf29ce484222325ULL;  // FNV-1a, then a finalizer
  for (unsigned char c : token) {
    h ^= c;
    h *= 0x100000001b3ULL;
  }
  return NotMissing(SplitMix64(h));
}

absl::Status ParseCriteoLine(absl::string_view line, CtrExample* e) {
  const std::vector<absl::string_view> fields = absl::StrSplit(line, '\t');
  if (fields.size() != kCriteoFields) {
    return LineError(absl::StrCat("expected ", kCriteoFields,
                                  " tab-separated fields (label, 13 integers, 26 "
                                  "categorical), got ",
                                  fields.size()));
  }
  SetAllMissing(e);
  if (fields[0] == "0" || fields[0] == "1") {
    e->label = fields[0] == "1" ? 1.0f : 0.0f;
  } else {
    return LineError(absl::StrCat("label: expected 0 or 1, got \"", fields[0], "\""));
  }
  for (int j = 0; j < kCtrDense; ++j) {
    const absl::string_view f = fields[1 + j];
    if (f.empty()) continue;
    int64_t x = 0;
    if (!absl::SimpleAtoi(f, &x)) {
      return LineError(absl::StrCat("integer field ", j + 1, ": expected an integer, got \"",
                                    f, "\""));
    }
    e->dense[j] = SignedLog1p(static_cast<double>(x));
  }
  for (int f = 0; f < kCtrCategorical; ++f) {
    const absl::string_view token = fields[1 + kCtrDense + f];
    if (!token.empty()) e->ids[f] = CtrFeatureId(f, CtrTokenRawId(token));
  }
  return absl::OkStatus();
}

absl::Status ParseLibsvmLine(absl::string_view line, int64_t dense_base, CtrExample* e) {
  line = line.substr(0, line.find('#'));
  const std::vector<absl::string_view> tokens =
      absl::StrSplit(line, absl::ByAnyChar(" \t"), absl::SkipEmpty());
  if (tokens.empty()) return LineError("no label");
  SetAllMissing(e);
  double label = 0;
  if (!absl::SimpleAtod(tokens[0], &label) || std::isnan(label)) {
    return LineError(absl::StrCat("label: expected a number, got \"", tokens[0], "\""));
  }
  e->label = label > 0 ? 1.0f : 0.0f;
  int categorical = 0;
  for (size_t t = 1; t < tokens.size(); ++t) {
    const absl::string_view pair = tokens[t];
    const size_t colon = pair.find(':');
    uint64_t index = 0;
    double value = 0;
    if (colon == absl::string_view::npos ||
        !absl::SimpleAtoi(pair.substr(0, colon), &index) ||
        !absl::SimpleAtod(pair.substr(colon + 1), &value) || !std::isfinite(value)) {
      return LineError(absl::StrCat("pair ", t, ": expected index:value with a non-negative "
                                    "integer index and a finite value, got \"", pair, "\""));
    }
    if (dense_base >= 0 && index >= static_cast<uint64_t>(dense_base) &&
        index < static_cast<uint64_t>(dense_base) + kCtrDense) {
      e->dense[index - dense_base] = static_cast<float>(value);
      continue;
    }
    if (value == 0) continue;
    if (index >= kMissingRawId) {
      return LineError(absl::StrCat("pair ", t, ": index ", index, " is not below 2^52 - 1"));
    }
    const int f = categorical % kCtrCategorical;
    uint64_t raw = index;
    if (categorical >= kCtrCategorical) {
      raw = NotMissing(Hash4(0, CtrIdRaw(e->ids[f]), index, 0));
    }
    e->ids[f] = CtrFeatureId(f, raw);
    ++categorical;
  }
  return absl::OkStatus();
}

absl::Status ForEachCtrExample(const std::string& path, const CtrReaderOptions& options,
                               const std::function<absl::Status(const CtrExample&)>& fn) {
  std::ifstream in(path);
  if (!in) {
    const int err = errno;
    if (err == ENOENT) return absl::NotFoundError(absl::StrCat(path, ": no such file"));
    return absl::UnavailableError(absl::StrCat(path, ": ", std::strerror(err)));
  }
  std::string line;
  int64_t line_number = 0, examples = 0;
  CtrExample e;
  while ((options.max_examples < 0 || examples < options.max_examples) &&
         std::getline(in, line)) {
    ++line_number;
    absl::string_view view(line);
    if (!view.empty() && view.back() == '\r') view.remove_suffix(1);
    if (view.empty()) continue;
    if (options.format == CtrFormat::kLibsvm &&
        absl::StripAsciiWhitespace(view.substr(0, view.find('#'))).empty()) {
      continue;  // blank or comment only
    }
    absl::Status s = options.format == CtrFormat::kCriteoTsv
                         ? ParseCriteoLine(view, &e)
                         : ParseLibsvmLine(view, options.libsvm_dense_base, &e);
    if (!s.ok()) {
      return absl::InvalidArgumentError(absl::StrCat(path, ":", line_number, ": ", s.message()));
    }
    if (absl::Status fs = fn(e); !fs.ok()) return fs;
    ++examples;
  }
  if (in.bad()) {
    return absl::DataLossError(absl::StrCat(path, ": read error after line ", line_number));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<CtrExample>> ReadCtrFile(const std::string& path,
                                                    const CtrReaderOptions& options) {
  std::vector<CtrExample> out;
  absl::Status s = ForEachCtrExample(path, options, [&](const CtrExample& e) {
    out.push_back(e);
    return absl::OkStatus();
  });
  if (!s.ok()) return s;
  return out;
}

}  // namespace ps
