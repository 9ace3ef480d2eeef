// Checkpoint encoding of a shard: its ShardState as a serialized
// ps.v1.ShardSnapshot (proto/ps.proto), so it can be written to disk or sent
// over the wire and restored into a shard with the same id and shard count.
//
// Stateless functions; thread-safe (Shard itself is).
#ifndef PS_SERVER_CHECKPOINT_H_
#define PS_SERVER_CHECKPOINT_H_

#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "server/shard.h"

namespace ps {

// The shard's spec, version and weights as ShardSnapshot bytes.
// FAILED_PRECONDITION if the shard has no parameters yet.
absl::StatusOr<std::string> EncodeCheckpoint(const Shard& shard);

// Restores `shard` from EncodeCheckpoint's bytes. INVALID_ARGUMENT if they do
// not parse or belong to another shard position or shard count.
absl::Status RestoreCheckpoint(absl::string_view bytes, Shard* shard);

}  // namespace ps

#endif  // PS_SERVER_CHECKPOINT_H_
