// Embedding ids: which server owns a row, and the row's first values.
//
// Embedding tables (server/core/embedding_table.h) key their rows by 64-bit ids
// that the model picks freely: dense counters, hashed features, ids with
// only their high bits set. ShardOfId spreads them over the servers by a
// strong 64-bit mixer (murmur3's fmix64, a bijection) followed by a
// multiply-shift range reduction, so the split is balanced whatever the ids
// look like (common/embedding_shard_test.cc measures it, Zipf-skewed ids
// included). InitRow gives a row its first values from (seed, id) alone, so
// any shard, any restart and any order of first touches creates the same
// row: integer hashing and an exact int->float conversion, no libm, so the
// values are the same bit for bit on every x86-64.
//
// Pure functions; thread-safe.
#ifndef PS_COMMON_EMBEDDING_SHARD_H_
#define PS_COMMON_EMBEDDING_SHARD_H_

#include <cstdint>

namespace ps {

// murmur3's 64-bit finalizer: a bijection whose every output bit depends on
// every input bit. Mix64(0) == 0.
inline uint64_t Mix64(uint64_t x) {
  x ^= x >> 33;
  x *= 0xff51afd7ed558ccdULL;
  x ^= x >> 33;
  x *= 0xc4ceb9fe1a85ec53ULL;
  x ^= x >> 33;
  return x;
}

// The server in [0, num_shards) that owns row `id`: floor(Mix64(id) *
// num_shards / 2^64). REQUIRES: num_shards >= 1.
int ShardOfId(uint64_t id, int num_shards);

// Writes row `id`'s initial values to out[0, dim): each uniform on the grid
// of 2^24 points k * 2^-23 - 1 (k = 0 .. 2^24 - 1) in [-1, 1), times
// `scale`, drawn from a hash of (seed, id, j). Deterministic bit for bit.
// REQUIRES: dim >= 0; out holds dim floats.
void InitRow(uint64_t seed, uint64_t id, int dim, float scale, float* out);

}  // namespace ps

#endif  // PS_COMMON_EMBEDDING_SHARD_H_
