// WeightsSnapshot: an immutable view of a shard's weights at one version,
// what every pull is answered with.
//
// The shard never writes into a buffer a snapshot holds (it copies on
// write), so a snapshot may be read, and sent, from any thread without a
// lock for as long as it is held. Shares the layout and the weights.
#ifndef PS_SERVER_CORE_WEIGHTS_SNAPSHOT_H_
#define PS_SERVER_CORE_WEIGHTS_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <vector>

#include "common/partition.h"

namespace ps {

// What a shard holds: its slices of the model and where each sits in its
// flat buffer (common/partition.h).
using ShardLayout = SliceLayout;

struct WeightsSnapshot {
  int64_t version = 0;
  std::shared_ptr<const ShardLayout> layout;
  std::shared_ptr<const std::vector<float>> weights;  // flat, in layout order
};

}  // namespace ps

#endif  // PS_SERVER_CORE_WEIGHTS_SNAPSHOT_H_
