#include "server/core/checkpoint_chain.h"

#include "gtest/gtest.h"

namespace ps {
namespace {

using Kind = CheckpointChain::Kind;

// Plans the export at `version` and records it as made.
CheckpointChain::Plan Export(CheckpointChain* chain, int64_t version) {
  const CheckpointChain::Plan plan = chain->Next(version);
  chain->Exported(plan, version);
  return plan;
}

TEST(CheckpointChain, EveryExportIsFullWithFullEveryOne) {
  CheckpointChain chain(1);
  for (int64_t v : {0, 5, 5, 9}) EXPECT_EQ(Export(&chain, v).kind, Kind::kFull) << v;
}

TEST(CheckpointChain, FullEveryKthDeltasOnTheExportBefore) {
  CheckpointChain chain(3);
  CheckpointChain::Plan p = Export(&chain, 10);
  EXPECT_EQ(p.kind, Kind::kFull);
  p = Export(&chain, 20);
  EXPECT_EQ(p.kind, Kind::kDelta);
  EXPECT_EQ(p.base, 10);
  p = Export(&chain, 30);
  EXPECT_EQ(p.kind, Kind::kDelta);
  EXPECT_EQ(p.base, 20);
  EXPECT_EQ(Export(&chain, 40).kind, Kind::kFull);
  p = Export(&chain, 50);
  EXPECT_EQ(p.kind, Kind::kDelta);
  EXPECT_EQ(p.base, 40);
}

TEST(CheckpointChain, SameVersionIsUnchangedAndCountsNothing) {
  CheckpointChain chain(2);
  Export(&chain, 7);
  CheckpointChain::Plan p = Export(&chain, 7);
  EXPECT_EQ(p.kind, Kind::kUnchanged);
  EXPECT_EQ(p.base, 7);
  p = Export(&chain, 8);  // still the first delta after the full one
  EXPECT_EQ(p.kind, Kind::kDelta);
  EXPECT_EQ(p.base, 7);
  EXPECT_EQ(Export(&chain, 9).kind, Kind::kFull);
}

TEST(CheckpointChain, RestartMakesTheNextFull) {
  CheckpointChain chain(4);
  Export(&chain, 1);
  Export(&chain, 2);
  chain.Restart();
  EXPECT_EQ(Export(&chain, 3).kind, Kind::kFull);
  // Even at the version of the export before: its file may be the one lost.
  chain.Restart();
  EXPECT_EQ(Export(&chain, 3).kind, Kind::kFull);
  CheckpointChain::Plan p = Export(&chain, 4);
  EXPECT_EQ(p.kind, Kind::kDelta);
  EXPECT_EQ(p.base, 3);
}

}  // namespace
}  // namespace ps
