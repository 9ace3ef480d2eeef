// AdmissionFilter: which embedding ids have been seen often enough to earn
// a row (feature admission).
//
// A table with admission creates an id's row only once the id has been
// sighted min_count times (EmbeddingTable counts one sighting per id a Pull
// names); until then a pull answers the row's initial value and a push's
// gradient for it is dropped. Two kinds:
//   - count: exact. One entry per id sighted and not yet admitted (about
//     20 bytes each in an absl::flat_hash_map); Forget drops it once the
//     row exists, so memory grows with the ids pending, not the table.
//   - bloom: a counting Bloom filter (count-min sketch with conservative
//     update) of 4-bit counters, two per byte, bloom_bytes in all whatever
//     the ids: at most 1 byte per id for bloom_bytes <= the ids expected.
//     An id whose counters are all shared with others' may be admitted
//     early, never late; counters stop at 15 (min_count <= 15), and an id
//     evicted and seen again is admitted at once (its counters stay).
//
// Thread-compatible (the shard's lock guards the table that owns it).
#ifndef PS_SERVER_CORE_ADMISSION_H_
#define PS_SERVER_CORE_ADMISSION_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace ps {

struct AdmissionOptions {
  enum class Kind { kNone, kCount, kBloom };
  Kind kind = Kind::kNone;  // kNone: every id gets a row at first touch
  int min_count = 1;        // sightings that admit an id: >= 1; bloom: <= 15
  // Bloom: the filter's bytes per table and shard, >= 1 and <= 2^34.
  int64_t bloom_bytes = int64_t{1} << 20;

  // INVALID_ARGUMENT naming the first bad field.
  absl::Status Validate() const;
  bool operator==(const AdmissionOptions& o) const {
    return kind == o.kind && min_count == o.min_count && bloom_bytes == o.bloom_bytes;
  }
};

// "none", "count:N" or "bloom:N" (N = min_count; bloom_bytes left as
// given). INVALID_ARGUMENT naming the text otherwise.
absl::Status ParseAdmissionKind(absl::string_view text, AdmissionOptions* options);
// "none", "count:3", "bloom:3".
std::string AdmissionToString(const AdmissionOptions& options);

class AdmissionFilter {
 public:
  // REQUIRES: options.Validate() is OK and options.kind != kNone.
  static std::unique_ptr<AdmissionFilter> Create(const AdmissionOptions& options);
  virtual ~AdmissionFilter() = default;

  // Counts one sighting of `id`: true once it has been sighted min_count
  // times (this one included).
  virtual bool Sight(uint64_t id) = 0;
  // Whether `id` has been sighted min_count times; counts nothing.
  virtual bool Admitted(uint64_t id) const = 0;
  // `id`'s row exists now: count drops its entry (bloom keeps its counters).
  virtual void Forget(uint64_t id) = 0;
  // Count: ids sighted and not yet admitted; bloom: -1 (not known).
  virtual int64_t pending_ids() const = 0;
  // Bytes on the heap.
  virtual size_t MemoryBytes() const = 0;
};

}  // namespace ps

#endif  // PS_SERVER_CORE_ADMISSION_H_
