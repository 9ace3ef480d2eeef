#include "server/tier/rocksdb_row_tier.h"

#include <cctype>
#include <cstring>
#include <filesystem>
#include <set>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"
#include "rocksdb/cache.h"
#include "rocksdb/db.h"
#include "rocksdb/filter_policy.h"
#include "rocksdb/options.h"
#include "rocksdb/table.h"
#include "rocksdb/utilities/checkpoint.h"

namespace ps {
namespace {

// Memtables of this size, two at most: the tier's writes cost a bounded
// 16 MiB of memory beyond the table's budget, not RocksDB's 64 MiB default.
constexpr size_t kWriteBufferBytes = 8 << 20;

std::string KeyOf(uint64_t id) {
  std::string k(8, '\0');
  for (int i = 0; i < 8; ++i) k[i] = static_cast<char>(id >> (56 - 8 * i));
  return k;
}

uint64_t IdOfKey(const rocksdb::Slice& k) {
  uint64_t id = 0;
  for (size_t i = 0; i < 8 && i < k.size(); ++i) {
    id = (id << 8) | static_cast<unsigned char>(k.data()[i]);
  }
  return id;
}

rocksdb::Options DbOptions(const RocksDbRowTierOptions& o) {
  rocksdb::Options options;
  options.create_if_missing = true;
  options.write_buffer_size = kWriteBufferBytes;
  options.max_write_buffer_number = 2;
  // Floats barely compress; the CPU is the training's.
  options.compression = rocksdb::kNoCompression;
  // A Bloom filter of the memtables' keys: a row never written costs no
  // skiplist search either.
  options.memtable_prefix_bloom_size_ratio = 0.05;
  options.memtable_whole_key_filtering = true;
  rocksdb::BlockBasedTableOptions table;
  // Most misses are rows never stored (new ids): a Bloom filter (10 bits a
  // key, ~1% false positives) answers those without reading a block.
  table.filter_policy.reset(rocksdb::NewBloomFilterPolicy(10));
  table.whole_key_filtering = true;
  if (o.block_cache_bytes > 0) {
    table.block_cache = rocksdb::NewLRUCache(static_cast<size_t>(o.block_cache_bytes));
  }
  options.table_factory.reset(rocksdb::NewBlockBasedTableFactory(table));
  return options;
}

rocksdb::WriteOptions NoLog() {
  rocksdb::WriteOptions w;
  w.disableWAL = true;  // the checkpoints are what survives a crash
  return w;
}

// `table` as one path component: letters, digits, '_' and '-' kept, every
// other byte (and a leading '.') as %XX.
std::string PathComponent(const std::string& table) {
  std::string out;
  for (size_t i = 0; i < table.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(table[i]);
    if (std::isalnum(c) || c == '_' || c == '-' || (c == '.' && i > 0)) {
      out.push_back(static_cast<char>(c));
    } else {
      out += absl::StrFormat("%%%02X", c);
    }
  }
  return out;
}

}  // namespace

absl::StatusOr<std::unique_ptr<RocksDbRowTier>> RocksDbRowTier::Open(
    const RocksDbRowTierOptions& options) {
  if (options.dir.empty()) return absl::InvalidArgumentError("row tier: empty directory");
  if (options.row_floats < 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row tier ", options.dir, ": row_floats must be >= 1, got ", options.row_floats));
  }
  if (options.block_cache_bytes < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "row tier ", options.dir, ": negative block cache of ", options.block_cache_bytes));
  }
  std::unique_ptr<RocksDbRowTier> tier(new RocksDbRowTier(options, nullptr));
  // An earlier run's rows are not this run's: the shard's state comes from
  // its checkpoint.
  RETURN_IF_ERROR(tier->OpenDb(/*destroy=*/true));
  return tier;
}

absl::Status RocksDbRowTier::OpenDb(bool destroy) {
  const rocksdb::Options db_options = DbOptions(options_);
  if (destroy) {
    rocksdb::Status s = rocksdb::DestroyDB(options_.dir, db_options);
    if (!s.ok() && !s.IsNotFound() && !s.IsPathNotFound()) {
      return absl::FailedPreconditionError(
          absl::StrCat("row tier ", options_.dir, ": cannot empty it: ", s.ToString()));
    }
  }
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::Open(db_options, options_.dir, &db);
  if (!s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("row tier ", options_.dir, ": cannot open it: ", s.ToString()));
  }
  db_.reset(db);
  return absl::OkStatus();
}

absl::Status RocksDbRowTier::Snapshot(const std::string& dir) {
  rocksdb::Checkpoint* made = nullptr;
  rocksdb::Status s = rocksdb::Checkpoint::Create(db_.get(), &made);
  std::unique_ptr<rocksdb::Checkpoint> checkpoint(made);
  if (s.ok()) s = checkpoint->CreateCheckpoint(dir);
  if (!s.ok()) return Error("snapshot", absl::StrCat(dir, ": ", s.ToString()));
  return absl::OkStatus();
}

absl::Status RocksDbRowTier::RestoreFrom(const std::string& dir) {
  static_cast<void>(db_->Close());
  db_.reset();
  std::error_code ec;
  std::filesystem::remove_all(options_.dir, ec);
  if (!ec) std::filesystem::create_directories(options_.dir, ec);
  for (std::filesystem::directory_iterator it(dir, ec), end; !ec && it != end; it.increment(ec)) {
    if (!it->is_regular_file()) continue;
    const std::filesystem::path to = std::filesystem::path(options_.dir) / it->path().filename();
    // Table files never change once written: a link is a copy.
    if (it->path().extension() == ".sst") {
      std::filesystem::create_hard_link(it->path(), to, ec);
      if (!ec) continue;
    }
    std::filesystem::copy_file(it->path(), to, ec);
  }
  absl::Status opened =
      ec ? absl::FailedPreconditionError(ec.message()) : OpenDb(/*destroy=*/false);
  if (opened.ok()) return absl::OkStatus();
  absl::Status empty = OpenDb(/*destroy=*/true);  // usable, if empty
  return absl::FailedPreconditionError(
      absl::StrCat("row tier ", options_.dir, ": cannot restore the snapshot ", dir, ": ",
                   opened.message(), empty.ok() ? "" : absl::StrCat("; ", empty.message())));
}

RocksDbRowTier::RocksDbRowTier(const RocksDbRowTierOptions& options,
                               std::unique_ptr<rocksdb::DB> db)
    : options_(options), db_(std::move(db)) {}

RocksDbRowTier::~RocksDbRowTier() {
  if (db_) static_cast<void>(db_->Close());
  db_.reset();
  if (options_.remove_when_closed) {
    std::error_code ignored;
    std::filesystem::remove_all(options_.dir, ignored);
  }
}

absl::Status RocksDbRowTier::Error(const char* what, const std::string& message) const {
  return absl::UnavailableError(absl::StrCat("row tier ", options_.dir, ": ", what, ": ", message));
}

absl::Status RocksDbRowTier::Put(uint64_t id, absl::Span<const float> row, uint32_t step) {
  if (static_cast<int>(row.size()) != options_.row_floats) {
    return absl::InvalidArgumentError(absl::StrCat("row tier ", options_.dir, ": a row of ",
                                                   row.size(), " floats, the tier's have ",
                                                   options_.row_floats));
  }
  const size_t bytes = row.size() * sizeof(float);
  value_.resize(bytes + sizeof(step));
  std::memcpy(&value_[0], row.data(), bytes);
  std::memcpy(&value_[bytes], &step, sizeof(step));
  rocksdb::Status s = db_->Put(NoLog(), KeyOf(id), value_);
  if (!s.ok()) return Error("write", s.ToString());
  return absl::OkStatus();
}

absl::StatusOr<bool> RocksDbRowTier::Get(uint64_t id, absl::Span<float> row, uint32_t* step) {
  rocksdb::PinnableSlice value;
  rocksdb::Status s =
      db_->Get(rocksdb::ReadOptions(), db_->DefaultColumnFamily(), KeyOf(id), &value);
  if (s.IsNotFound()) return false;
  if (!s.ok()) return Error("read", s.ToString());
  const size_t bytes = static_cast<size_t>(options_.row_floats) * sizeof(float);
  if (value.size() != bytes + sizeof(uint32_t) || row.size() * sizeof(float) != bytes) {
    return absl::DataLossError(absl::StrCat("row tier ", options_.dir, ": row ", id, " holds ",
                                            value.size(), " bytes, expected ",
                                            bytes + sizeof(uint32_t)));
  }
  std::memcpy(row.data(), value.data(), bytes);
  std::memcpy(step, value.data() + bytes, sizeof(*step));
  return true;
}

absl::Status RocksDbRowTier::ForEach(
    const std::function<void(uint64_t id, absl::Span<const float> row, uint32_t step)>& visit)
    const {
  const size_t bytes = static_cast<size_t>(options_.row_floats) * sizeof(float);
  std::vector<float> row(options_.row_floats);
  std::unique_ptr<rocksdb::Iterator> it(db_->NewIterator(rocksdb::ReadOptions()));
  for (it->SeekToFirst(); it->Valid(); it->Next()) {
    const rocksdb::Slice v = it->value();
    if (v.size() != bytes + sizeof(uint32_t)) {
      return absl::DataLossError(absl::StrCat("row tier ", options_.dir, ": row ",
                                              IdOfKey(it->key()), " holds ", v.size(),
                                              " bytes, expected ", bytes + sizeof(uint32_t)));
    }
    uint32_t step;
    std::memcpy(row.data(), v.data(), bytes);
    std::memcpy(&step, v.data() + bytes, sizeof(step));
    visit(IdOfKey(it->key()), row, step);
  }
  if (!it->status().ok()) return Error("scan", it->status().ToString());
  return absl::OkStatus();
}

absl::Status RocksDbRowTier::Delete(uint64_t id) {
  rocksdb::Status s = db_->Delete(NoLog(), KeyOf(id));
  if (!s.ok()) return Error("delete", s.ToString());
  return absl::OkStatus();
}

absl::Status RocksDbRowTier::Clear() {
  // Every key is 8 bytes: [0^8, 0xff^8) and then 0xff^8 itself.
  const std::string lo(8, '\0'), hi(8, '\xff');
  rocksdb::Status s = db_->DeleteRange(NoLog(), db_->DefaultColumnFamily(), lo, hi);
  if (s.ok()) s = db_->Delete(NoLog(), hi);
  if (!s.ok()) return Error("clear", s.ToString());
  return absl::OkStatus();
}

int64_t RocksDbRowTier::num_rows() const {
  uint64_t n = 0;
  if (!db_->GetIntProperty("rocksdb.estimate-num-keys", &n)) return 0;
  return static_cast<int64_t>(n);
}

absl::Status ReadRocksDbSnapshot(
    const std::string& dir, int row_floats,
    const std::function<void(uint64_t id, absl::Span<const float> row, uint32_t step)>& visit) {
  RocksDbRowTierOptions o;
  o.dir = dir;
  o.row_floats = row_floats;
  rocksdb::DB* db = nullptr;
  rocksdb::Status s = rocksdb::DB::OpenForReadOnly(DbOptions(o), dir, &db);
  if (!s.ok()) {
    return absl::FailedPreconditionError(
        absl::StrCat("row tier snapshot ", dir, ": cannot open it: ", s.ToString()));
  }
  std::unique_ptr<RocksDbRowTier> tier(new RocksDbRowTier(o, std::unique_ptr<rocksdb::DB>(db)));
  return tier->ForEach(visit);
}

SparseTablesOptions::TierFactory RocksDbTiersUnder(const std::string& dir) {
  struct Opened {
    absl::Mutex mu;
    std::set<int> shards ABSL_GUARDED_BY(mu);  // whose folder was emptied
    int64_t count ABSL_GUARDED_BY(mu) = 0;
  };
  auto opened = std::make_shared<Opened>();
  return [dir, opened](int shard_id, const std::string& table,
                       int row_floats) -> absl::StatusOr<std::unique_ptr<RowTier>> {
    const std::string shard = absl::StrCat(dir, "/shard-", shard_id);
    int64_t n;
    std::error_code ec;
    {
      absl::MutexLock l(&opened->mu);
      // An earlier run's databases are not this run's.
      if (opened->shards.insert(shard_id).second) std::filesystem::remove_all(shard, ec);
      n = ++opened->count;
    }
    if (!ec) std::filesystem::create_directories(shard, ec);
    if (ec) {
      return absl::FailedPreconditionError(
          absl::StrCat("--table_dir: cannot empty or make ", shard, ": ", ec.message()));
    }
    // A folder of its own: a table installed again (a rollback) opens its
    // new tier while the old one is still open.
    RocksDbRowTierOptions o;
    o.dir = absl::StrCat(shard, "/", PathComponent(table), ".", n);
    o.row_floats = row_floats;
    o.remove_when_closed = true;
    ASSIGN_OR_RETURN(std::unique_ptr<RocksDbRowTier> tier, RocksDbRowTier::Open(o));
    return std::unique_ptr<RowTier>(std::move(tier));
  };
}

}  // namespace ps
