#include "server/core/admission.h"

#include <algorithm>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/embedding_shard.h"

namespace ps {

namespace {

constexpr int kBloomMaxCount = 15;  // 4-bit counters
constexpr int kBloomHashes = 3;

class CountFilter final : public AdmissionFilter {
 public:
  explicit CountFilter(int min_count) : min_count_(min_count) {}
  bool Sight(uint64_t id) override { return ++seen_[id] >= min_count_; }
  bool Admitted(uint64_t id) const override {
    auto it = seen_.find(id);
    return min_count_ <= (it == seen_.end() ? 0 : it->second);
  }
  void Forget(uint64_t id) override { seen_.erase(id); }
  int64_t pending_ids() const override { return static_cast<int64_t>(seen_.size()); }
  size_t MemoryBytes() const override {
    // A slot per bucket plus a control byte (absl's Swiss table).
    return seen_.capacity() * (sizeof(std::pair<const uint64_t, int>) + 1);
  }

 private:
  const int min_count_;
  absl::flat_hash_map<uint64_t, int> seen_;
};

class BloomFilter final : public AdmissionFilter {
 public:
  BloomFilter(int min_count, int64_t bytes)
      : min_count_(min_count), counters_(static_cast<uint64_t>(bytes) * 2), bytes_(bytes, 0) {}

  bool Sight(uint64_t id) override {
    uint64_t at[kBloomHashes];
    Positions(id, at);
    int least = kBloomMaxCount;
    for (uint64_t a : at) least = std::min(least, Get(a));
    if (least < kBloomMaxCount) {
      // Conservative update: only the counters at the least grow, which
      // keeps other ids' estimates from growing with this one's.
      for (uint64_t a : at) {
        if (Get(a) == least) Set(a, least + 1);
      }
      ++least;
    }
    return least >= min_count_;
  }
  bool Admitted(uint64_t id) const override {
    uint64_t at[kBloomHashes];
    Positions(id, at);
    for (uint64_t a : at) {
      if (Get(a) < min_count_) return false;
    }
    return true;
  }
  void Forget(uint64_t) override {}
  int64_t pending_ids() const override { return -1; }
  size_t MemoryBytes() const override { return bytes_.capacity(); }

 private:
  // kBloomHashes counters of `id`, by double hashing over one mix.
  void Positions(uint64_t id, uint64_t* at) const {
    const uint64_t h1 = Mix64(id ^ 0x9e3779b97f4a7c15ULL);
    const uint64_t h2 = Mix64(h1) | 1;
    for (int i = 0; i < kBloomHashes; ++i) at[i] = (h1 + i * h2) % counters_;
  }
  int Get(uint64_t c) const { return (bytes_[c >> 1] >> ((c & 1) * 4)) & 0xf; }
  void Set(uint64_t c, int v) {
    unsigned char& b = bytes_[c >> 1];
    const int shift = (c & 1) * 4;
    b = static_cast<unsigned char>((b & ~(0xf << shift)) | (v << shift));
  }

  const int min_count_;
  const uint64_t counters_;
  std::vector<unsigned char> bytes_;
};

}  // namespace

absl::Status AdmissionOptions::Validate() const {
  if (kind == Kind::kNone) return absl::OkStatus();
  if (min_count < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("admission: the sightings that admit an id must be >= 1, got ", min_count));
  }
  if (kind == Kind::kBloom && min_count > kBloomMaxCount) {
    return absl::InvalidArgumentError(absl::StrCat("admission: a bloom filter counts to ",
                                                   kBloomMaxCount, "; got bloom:", min_count,
                                                   " (use count:", min_count, ")"));
  }
  if (kind == Kind::kBloom && (bloom_bytes < 1 || bloom_bytes > (int64_t{1} << 34))) {
    return absl::InvalidArgumentError(
        absl::StrCat("admission: bloom filter bytes must be in [1, 2^34], got ", bloom_bytes));
  }
  return absl::OkStatus();
}

absl::Status ParseAdmissionKind(absl::string_view text, AdmissionOptions* options) {
  if (text == "none") {
    options->kind = AdmissionOptions::Kind::kNone;
    return absl::OkStatus();
  }
  const size_t colon = text.find(':');
  const absl::string_view kind = text.substr(0, colon);
  int n = 0;
  if (colon == absl::string_view::npos || (kind != "count" && kind != "bloom") ||
      !absl::SimpleAtoi(text.substr(colon + 1), &n)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "admission \"", text, "\": expected none, count:N or bloom:N (N sightings admit an id)"));
  }
  options->kind = kind == "count" ? AdmissionOptions::Kind::kCount : AdmissionOptions::Kind::kBloom;
  options->min_count = n;
  return options->Validate();
}

std::string AdmissionToString(const AdmissionOptions& o) {
  switch (o.kind) {
    case AdmissionOptions::Kind::kNone:
      return "none";
    case AdmissionOptions::Kind::kCount:
      return absl::StrCat("count:", o.min_count);
    case AdmissionOptions::Kind::kBloom:
      return absl::StrCat("bloom:", o.min_count);
  }
  return "none";
}

std::unique_ptr<AdmissionFilter> AdmissionFilter::Create(const AdmissionOptions& options) {
  if (options.kind == AdmissionOptions::Kind::kBloom) {
    return std::make_unique<BloomFilter>(options.min_count, options.bloom_bytes);
  }
  return std::make_unique<CountFilter>(options.min_count);
}

}  // namespace ps
