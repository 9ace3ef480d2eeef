// Writes the wire fuzzer's seed corpus (tests/fuzz/corpus) into the folder
// given as the only argument:
//
//   bazel run //tests/fuzz:make_corpus -- "$PWD/tests/fuzz/corpus"
//
// Valid messages come from the project's own encoders (rpc/raw_wire.h)
// for every shard of FuzzSpec() cut 1, 2 and 3 ways; hostile ones are
// written field by field with ProtoWriter; embedding-row requests and table
// specs are protobuf messages. Each is saved whole and cut into
// pieces (tests/fuzz/fuzz_input.h). File names say what each input is.
#include <cmath>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <limits>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "proto/ps.pb.h"
#include "common/table_spec.h"
#include "rpc/raw_wire.h"
#include "tests/fuzz/fuzz_input.h"

namespace ps {
namespace fuzz {
namespace {

constexpr int64_t kMax = std::numeric_limits<int64_t>::max();

std::string Bytes(const grpc::ByteBuffer& buffer) {
  std::vector<grpc::Slice> slices;
  if (!buffer.Dump(&slices).ok()) {
    std::fprintf(stderr, "make_corpus: cannot read a ByteBuffer\n");
    std::exit(1);
  }
  std::string out;
  for (const grpc::Slice& s : slices) out.append(reinterpret_cast<const char*>(s.begin()), s.size());
  return out;
}

// Messages of one stream call, concatenated: protobuf merges them into one
// message whose chunks are all those of the call, in order.
std::string Bytes(const std::vector<grpc::ByteBuffer>& buffers) {
  std::string out;
  for (const grpc::ByteBuffer& b : buffers) out += Bytes(b);
  return out;
}

// A TensorSlice with any field values, `data` as given.
std::string TensorSliceBytes(const std::string& name, const std::vector<int64_t>& shape,
                             int64_t offset, int64_t length, const std::string& data) {
  ProtoWriter w;
  w.BytesField(1, name);
  std::string packed;
  for (int64_t d : shape) {
    ProtoWriter v;
    v.Varint(static_cast<uint64_t>(d));
    packed += Bytes(v.Finish());
  }
  if (!shape.empty()) w.BytesField(2, packed);
  w.VarintField(3, static_cast<uint64_t>(offset));
  w.VarintField(4, static_cast<uint64_t>(length));
  w.BytesField(5, data);
  return Bytes(w.Finish());
}

std::string Floats(const std::vector<float>& values) {
  std::string out(values.size() * sizeof(float), '\0');
  if (!values.empty()) std::memcpy(&out[0], values.data(), out.size());
  return out;
}

class Corpus {
 public:
  explicit Corpus(std::string dir) : dir_(std::move(dir)) {}

  // Saves `message` whole and, if it has at least 4 bytes, also cut at 1,
  // in the middle and 1 before the end (not model specs: they are not cut).
  void Add(FuzzTarget target, int num_shards, int shard, const std::string& what,
           const std::string& message) {
    Write(target, num_shards, shard, what, {}, message);
    const size_t n = message.size();
    if (n >= 4 && target != FuzzTarget::kModelSpec) {
      Write(target, num_shards, shard, what + "-cut3", {1, n / 2, n - 1}, message);
    }
  }

  // An embedding-row input (kPullRowsRequest, kPushRowsRequest,
  // kTableSpecs) under four of the server settings its cut count picks
  // (tests/fuzz/rows_fuzz.cc's RowsSetting): async; sync with LRU; sync
  // with FTRL; async with LRU and FTRL.
  void AddRows(FuzzTarget target, const std::string& what, const std::string& message) {
    for (size_t setting : {0, 3, 5, 6}) {
      Write(target, 1, 0, absl::StrCat(what, "-set", setting),
            std::vector<size_t>(setting, 0), message);
    }
  }

  int files() const { return files_; }

 private:
  void Write(FuzzTarget target, int num_shards, int shard, const std::string& what,
             const std::vector<size_t>& cuts, const std::string& message) {
    const std::string path = absl::StrCat(dir_, "/", TargetName(target), "-s", shard, "of",
                                          num_shards, "-", what);
    std::ofstream f(path, std::ios::binary | std::ios::trunc);
    f << MakeFuzzInput(target, num_shards, shard, cuts, message);
    if (!f.good()) {
      std::fprintf(stderr, "make_corpus: cannot write %s\n", path.c_str());
      std::exit(1);
    }
    ++files_;
  }

  std::string dir_;
  int files_ = 0;
};

void AddValidMessages(Corpus* corpus) {
  const ModelSpec& spec = FuzzSpec();
  TensorList values;
  for (const TensorSpec& t : spec) {
    values.emplace_back(t.num_elements());
    for (size_t i = 0; i < values.back().size(); ++i) values.back()[i] = 0.25f * (i + 1);
  }
  const SliceValues at = [&](const SliceRange& r) {
    return values[r.tensor_index].data() + r.offset;
  };
  for (int shards = 1; shards <= 3; ++shards) {
    for (int shard = 0; shard < shards; ++shard) {
      const std::vector<SliceRange> slices = ShardSlices(spec, shards, shard);
      auto add = [&](FuzzTarget target, const std::string& message) {
        corpus->Add(target, shards, shard, "valid", message);
      };
      add(FuzzTarget::kPushRequest, Bytes(EncodePushRequest(1, 7, spec, slices, at)));
      add(FuzzTarget::kPushPullRequest,
          Bytes(EncodePushPullRequest(1, 7, spec, slices, at, 7, 5000)));
      add(FuzzTarget::kPullResponse, Bytes(EncodePullResponse(8, spec, slices, at, nullptr)));
      // 8-byte chunks: every tensor in pieces of 2 floats.
      StreamCallHeader h;
      h.call_id = 3;
      h.kind = StreamCall::kPushPull;
      h.worker_id = 1;
      h.version = 7;
      h.min_version = 7;
      h.wait_timeout_ms = 5000;
      add(FuzzTarget::kStreamRequest,
          Bytes(EncodeStreamRequests(h, true, true, spec, slices, at, 8)));
      add(FuzzTarget::kStreamResponse,
          Bytes(EncodeStreamWeights(3, 8, spec, slices, at, nullptr, 8)));
      // The bf16 wire: every slice BF16, 8-byte chunks of 4 elements.
      auto add_bf16 = [&](FuzzTarget target, const std::string& message) {
        corpus->Add(target, shards, shard, "valid-bf16", message);
      };
      add_bf16(FuzzTarget::kPushRequest,
               Bytes(EncodePushRequest(1, 7, spec, slices, at, 0, WireDtype::kBf16)));
      add_bf16(FuzzTarget::kPullResponse, Bytes(EncodePullResponse(8, spec, slices, at, nullptr,
                                                                   ReplyInfo(), WireDtype::kBf16)));
      h.weights_dtype = WireDtype::kBf16;
      add_bf16(FuzzTarget::kStreamRequest,
               Bytes(EncodeStreamRequests(h, true, true, spec, slices, at, 8, WireDtype::kBf16)));
      if (shards == 1) {
        add(FuzzTarget::kTensorSlice, TensorSliceBytes("fc1.bias", {3}, 0, 3, Floats(values[1])));
      }
    }
  }
  ProtoWriter pull;
  pull.VarintField(1, 1);
  pull.VarintField(2, 7);
  pull.VarintField(3, 5000);
  corpus->Add(FuzzTarget::kPullRequest, 1, 0, "valid", Bytes(pull.Finish()));
  corpus->Add(FuzzTarget::kStreamResponse, 1, 0, "done-error",
              Bytes(EncodeStreamDone(3, 0, absl::InvalidArgumentError("push: bad chunk"))));
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "valid", EncodeFuzzSpec(spec));
}

void AddHostileMessages(Corpus* corpus) {
  // The stream push that used to wedge a server: fc1.bias in chunks (0, 1),
  // (1, 2^63 - 1) with 36 bytes of data, then (1 + 2^63 - 1 wrapped, 0), last.
  {
    ProtoWriter w;
    w.VarintField(1, 1);                                         // call_id
    w.VarintField(2, static_cast<uint64_t>(StreamCall::kPush));  // kind
    w.VarintField(3, 0);                                         // worker_id
    w.VarintField(4, 0);                                         // version
    w.BytesField(7, TensorSliceBytes("fc1.bias", {3}, 0, 1, Floats({1})));
    w.BytesField(7, TensorSliceBytes("fc1.bias", {3}, 1, kMax, std::string(36, '\1')));
    w.BytesField(7, TensorSliceBytes("fc1.bias", {3}, std::numeric_limits<int64_t>::min(), 0, ""));
    w.VarintField(8, 1);  // last
    corpus->Add(FuzzTarget::kStreamRequest, 1, 0, "overflow-wedge", Bytes(w.Finish()));
  }
  // PushRequests with one bad chunk each, against the whole model (1 shard).
  auto push = [&](const std::string& what, const std::string& slice) {
    ProtoWriter w;
    w.VarintField(1, 0);
    w.VarintField(2, 0);
    w.BytesField(3, slice);
    corpus->Add(FuzzTarget::kPushRequest, 1, 0, what, Bytes(w.Finish()));
  };
  push("negative-offset", TensorSliceBytes("fc2.bias", {2}, -1, 2, Floats({1, 2})));
  push("huge-length", TensorSliceBytes("fc2.bias", {2}, 0, kMax, Floats({1, 2})));
  push("nan", TensorSliceBytes("fc2.bias", {2}, 0, 2, Floats({1, std::nanf("")})));
  push("unknown-tensor", TensorSliceBytes("fc3.bias", {2}, 0, 2, Floats({1, 2})));
  push("wrong-shape", TensorSliceBytes("fc2.bias", {1, 2}, 0, 2, Floats({1, 2})));
  push("rank-9", TensorSliceBytes("fc2.bias", {1, 1, 1, 1, 1, 1, 1, 1, 2}, 0, 2, Floats({1, 2})));
  push("odd-bytes", TensorSliceBytes("fc2.bias", {2}, 0, 2, "12345"));
  push("long-varint", std::string(11, '\xff'));
  {
    ProtoWriter w;
    w.BytesField(3, TensorSliceBytes("fc2.bias", {2}, 0, 2, Floats({1, 2})));
    w.BytesField(3, TensorSliceBytes("fc2.bias", {2}, 0, 2, Floats({1, 2})));
    corpus->Add(FuzzTarget::kPushRequest, 1, 0, "duplicate-chunk", Bytes(w.Finish()));
  }
  {
    ProtoWriter w;
    w.VarintField(1, 1);
    w.LengthPrefix(2, 1000);  // weights longer than the message
    w.VarintField(1, 2);
    corpus->Add(FuzzTarget::kPullResponse, 1, 0, "truncated", Bytes(w.Finish()));
  }
  {
    ProtoWriter w;
    w.VarintField(1, 1);
    w.VarintField(5, 99);  // no such status code
    w.BytesField(6, "strange");
    w.VarintField(4, 1);
    corpus->Add(FuzzTarget::kStreamResponse, 1, 0, "unknown-code", Bytes(w.Finish()));
  }
  for (int t = 0; t < kNumTargets; ++t) {
    corpus->Add(static_cast<FuzzTarget>(t), 1, 0, "empty", "");
  }
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "overflowing-dims",
              EncodeFuzzSpec({{"w", {int64_t{1} << 62, 4}}}));
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "negative-dim", EncodeFuzzSpec({{"w", {-3}}}));
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "duplicate-name",
              EncodeFuzzSpec({{"w", {3}}, {"w", {3}}}));
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "rank-9",
              EncodeFuzzSpec({{"w", {1, 1, 1, 1, 1, 1, 1, 1, 1}}}));
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "empty-name", EncodeFuzzSpec({{"", {1}}}));
  corpus->Add(FuzzTarget::kModelSpec, 1, 0, "many-elements",
              EncodeFuzzSpec({{"a", {1 << 20, 1 << 10}}, {"b", {1}}}));
}

v1::PullRowsRequest PullRows(int worker, const std::string& table,
                             const std::vector<uint64_t>& ids) {
  v1::PullRowsRequest r;
  r.set_worker_id(worker);
  r.set_table(table);
  r.mutable_ids()->Add(ids.begin(), ids.end());
  return r;
}

v1::PushRowsRequest PushRows(int worker, const std::string& table,
                             const std::vector<uint64_t>& ids, const std::string& grads,
                             int64_t version, int64_t seq) {
  v1::PushRowsRequest r;
  r.set_worker_id(worker);
  r.set_table(table);
  r.mutable_ids()->Add(ids.begin(), ids.end());
  r.set_grads(grads);
  r.set_version(version);
  r.set_seq(seq);
  return r;
}

std::string Tables(const std::vector<TableSpec>& tables) {
  v1::ModelSpec spec;
  v1::TensorSpec* w = spec.add_tensors();
  w->set_name("w");
  w->add_shape(2);
  for (const TableSpec& t : tables) {
    v1::TableSpec* p = spec.add_tables();
    p->set_name(t.name);
    p->set_dim(t.dim);
    p->set_seed(t.seed);
    p->set_init_scale(t.init_scale);
  }
  return spec.SerializeAsString();
}

// Row requests against the fuzz server's tables "emb" (dim 3) and "one"
// (dim 1), --max_rows 8, --max_ids_per_request 16, 3 workers, sync step 2;
// and tables of model specs against the small limits (3 tables, names of
// 8 bytes, dim 16).
void AddRowMessages(Corpus* corpus) {
  const auto pull = [&](const std::string& what, const v1::PullRowsRequest& r) {
    corpus->AddRows(FuzzTarget::kPullRowsRequest, what, r.SerializeAsString());
  };
  const auto push = [&](const std::string& what, const v1::PushRowsRequest& r) {
    corpus->AddRows(FuzzTarget::kPushRowsRequest, what, r.SerializeAsString());
  };
  std::vector<uint64_t> nine, seventeen;
  for (uint64_t i = 0; i < 9; ++i) nine.push_back(i * 1000);
  for (uint64_t i = 0; i < 17; ++i) seventeen.push_back(i);
  const uint64_t kTop = std::numeric_limits<uint64_t>::max();
  pull("valid", PullRows(0, "emb", {1, 2, 3}));
  pull("valid-one", PullRows(2, "one", {kTop, 0}));
  pull("unknown-table", PullRows(0, "nope", {1}));
  pull("empty-table", PullRows(0, "", {1}));
  pull("repeated-id", PullRows(0, "emb", {4, 4}));
  pull("past-max-rows", PullRows(0, "emb", nine));
  pull("past-max-ids", PullRows(1, "emb", seventeen));
  pull("bad-worker", PullRows(99, "emb", {1}));
  push("valid", PushRows(0, "emb", {1, 2}, Floats({1, 2, 3, 4, 5, 6}), 2, 1));
  push("valid-one", PushRows(1, "one", {7}, Floats({0.5f}), 2, 0));
  push("closed-step", PushRows(1, "one", {7}, Floats({0.5f}), 1, 3));
  push("later-step", PushRows(0, "emb", {1}, Floats({1, 2, 3}), 3, 1));
  push("wrong-dim", PushRows(0, "emb", {1, 2}, Floats({1, 2, 3}), 2, 1));
  push("odd-bytes", PushRows(0, "emb", {1}, "1234567890a", 2, 1));
  push("nan", PushRows(0, "emb", {1}, Floats({1, std::nanf(""), 3}), 2, 1));
  push("huge", PushRows(0, "emb", {1}, Floats({3e38f, -3e38f, 3e38f}), 2, 1));
  push("unknown-table", PushRows(0, "nope", {1}, Floats({1, 2, 3}), 2, 1));
  push("past-max-rows", PushRows(0, "one", nine, Floats(std::vector<float>(9, 1)), 2, 1));
  push("past-max-ids",
       PushRows(0, "one", seventeen, Floats(std::vector<float>(17, 1)), 2, 1));
  push("repeated-id", PushRows(2, "one", {3, 3}, Floats({1, 1}), 2, 1));
  push("negative-seq", PushRows(0, "one", {3}, Floats({1}), 2, -1));
  push("max-seq", PushRows(0, "one", {3}, Floats({1}), 2, std::numeric_limits<int64_t>::max()));
  const auto tables = [&](const std::string& what, const std::vector<TableSpec>& t) {
    corpus->AddRows(FuzzTarget::kTableSpecs, what, Tables(t));
  };
  tables("valid", {{"emb", 3, 11, 0.5f}, {"one", 1, 12, 0.0f}});
  tables("four", {{"a", 1, 1}, {"b", 1, 1}, {"c", 1, 1}, {"d", 1, 1}});
  tables("dim-0", {{"a", 0, 1}});
  tables("dim-max", {{"a", std::numeric_limits<int32_t>::max(), 1}});
  tables("dim-min", {{"a", std::numeric_limits<int32_t>::min(), 1}});
  tables("long-name", {{"123456789", 1, 1}});
  tables("empty-name", {{"", 1, 1}});
  tables("twice", {{"a", 2, 1}, {"a", 2, 1}});
  tables("nan-scale", {{"a", 2, 1, std::nanf("")}});
  tables("negative-scale", {{"a", 2, 1, -1.0f}});
  tables("huge-scale", {{"a", 2, 1, 3.4e38f}});
}

}  // namespace
}  // namespace fuzz
}  // namespace ps

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_corpus DIR (an existing folder)\n");
    return 2;
  }
  ps::fuzz::Corpus corpus(argv[1]);
  ps::fuzz::AddValidMessages(&corpus);
  ps::fuzz::AddHostileMessages(&corpus);
  ps::fuzz::AddRowMessages(&corpus);
  std::printf("make_corpus: wrote %d inputs to %s\n", corpus.files(), argv[1]);
  return 0;
}
