// A small dense ShardState for the checkpoint tests (server/checkpoint/checkpoint_test.cc,
// server/checkpoint/embedding_checkpoint_test.cc): shard 1 of 2 of a 3-worker run of
// kTestSpec at version 7, workers 0 and 2 seen, distinct weights, SGD, no
// tables. Test-only; plain values.
#ifndef PS_SERVER_CORE_TEST_SHARD_STATE_H_
#define PS_SERVER_CORE_TEST_SHARD_STATE_H_

#include <numeric>

#include "common/partition.h"
#include "server/core/shard_state.h"

namespace ps {

inline const ModelSpec kTestSpec = {{"w", {4, 3}}, {"b", {5}}};

inline ShardState TestShardState() {
  ShardState s;
  s.shard_id = 1;
  s.num_shards = 2;
  s.num_workers = 3;
  s.workers_seen = {0, 2};
  s.spec = kTestSpec;
  s.version = 7;
  s.weights.resize(MakeSliceLayout(kTestSpec, 2, 1)->num_elements);
  std::iota(s.weights.begin(), s.weights.end(), 0.5f);
  s.optimizer = "sgd";
  s.incarnation = Incarnation{0x1234abcd5678ef90u, 3};
  return s;
}

}  // namespace ps

#endif  // PS_SERVER_CORE_TEST_SHARD_STATE_H_
