// Partition: which shard owns which elements of each tensor.
//
// Every tensor is split into S contiguous ranges, one per shard, whose sizes
// differ by at most one element: shard s owns [floor(n*s/S), floor(n*(s+1)/S)).
// So every tensor, large or small, spreads over all shards and each shard holds
// about 1/S of the model. Tensors with fewer than S elements leave some shards
// an empty range, which is omitted.
//
// A pure function of the spec and S, shared by servers and clients.
#ifndef PS_COMMON_PARTITION_H_
#define PS_COMMON_PARTITION_H_

#include <cstdint>
#include <memory>
#include <string>
#include <unordered_map>
#include <vector>

#include "common/model_spec.h"

namespace ps {

// One shard's piece of one tensor.
struct SliceRange {
  int tensor_index = 0;  // index into the ModelSpec
  int shard = 0;
  int64_t offset = 0;   // first element in the flattened tensor
  int64_t length = 0;   // elements, > 0
  int64_t flat_offset = 0;  // where the slice starts in the shard's flat buffer
};

// The slices shard `shard` owns, in spec order. REQUIRES: 0 <= shard < S.
std::vector<SliceRange> ShardSlices(const ModelSpec& spec, int num_shards, int shard);

// ShardSlices for every shard: result[s] is shard s's list.
std::vector<std::vector<SliceRange>> PartitionModel(const ModelSpec& spec, int num_shards);

// Sum of the lengths of `slices`.
int64_t SliceElements(const std::vector<SliceRange>& slices);

// One shard's slices of a model and where each sits in the shard's flat
// buffer: what a server holds, and what a client expects from that server.
// Immutable once built; shared by readers.
struct SliceLayout {
  ModelSpec spec;
  std::vector<SliceRange> slices;                // ShardSlices(spec, S, shard)
  std::unordered_map<std::string, int> by_name;  // tensor name -> index in slices
  int64_t num_elements = 0;                      // SliceElements(slices)
};

// The layout of shard `shard` of `num_shards`. REQUIRES: a valid spec
// (ValidateModelSpec), 0 <= shard < num_shards.
std::shared_ptr<const SliceLayout> MakeSliceLayout(const ModelSpec& spec, int num_shards,
                                                   int shard);

}  // namespace ps

#endif  // PS_COMMON_PARTITION_H_
