#include "common/partition.h"

namespace ps {

std::vector<SliceRange> ShardSlices(const ModelSpec& spec, int num_shards, int shard) {
  std::vector<SliceRange> out;
  int64_t flat = 0;
  for (int i = 0; i < static_cast<int>(spec.size()); ++i) {
    const __int128 n = spec[i].num_elements();
    const int64_t begin = static_cast<int64_t>(n * shard / num_shards);
    const int64_t end = static_cast<int64_t>(n * (shard + 1) / num_shards);
    if (end == begin) continue;
    SliceRange r;
    r.tensor_index = i;
    r.shard = shard;
    r.offset = begin;
    r.length = end - begin;
    r.flat_offset = flat;
    flat += r.length;
    out.push_back(r);
  }
  return out;
}

std::vector<std::vector<SliceRange>> PartitionModel(const ModelSpec& spec, int num_shards) {
  std::vector<std::vector<SliceRange>> out;
  out.reserve(num_shards);
  for (int s = 0; s < num_shards; ++s) out.push_back(ShardSlices(spec, num_shards, s));
  return out;
}

int64_t SliceElements(const std::vector<SliceRange>& slices) {
  int64_t n = 0;
  for (const SliceRange& r : slices) n += r.length;
  return n;
}

std::shared_ptr<const SliceLayout> MakeSliceLayout(const ModelSpec& spec, int num_shards,
                                                   int shard) {
  auto p = std::make_shared<SliceLayout>();
  p->spec = spec;
  p->slices = ShardSlices(spec, num_shards, shard);
  for (size_t i = 0; i < p->slices.size(); ++i) {
    p->by_name[spec[p->slices[i].tensor_index].name] = static_cast<int>(i);
  }
  p->num_elements = SliceElements(p->slices);
  return p;
}

}  // namespace ps
