#include "server/server_flags.h"

#include <cstdlib>
#include <fstream>
#include <iterator>
#include <optional>
#include <string>

#include "absl/flags/declare.h"
#include "absl/flags/flag.h"
#include "absl/flags/reflection.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

ABSL_DECLARE_FLAG(std::string, mode);
ABSL_DECLARE_FLAG(std::optional<int>, staleness);
ABSL_DECLARE_FLAG(double, pull_timeout);
ABSL_DECLARE_FLAG(double, tls_reload_secs);
ABSL_DECLARE_FLAG(std::string, tls_cert);
ABSL_DECLARE_FLAG(double, lr);
ABSL_DECLARE_FLAG(std::string, optimizer);
ABSL_DECLARE_FLAG(double, beta1);
ABSL_DECLARE_FLAG(double, beta2);
ABSL_DECLARE_FLAG(double, eps);
ABSL_DECLARE_FLAG(double, momentum);
ABSL_DECLARE_FLAG(double, weight_decay);
ABSL_DECLARE_FLAG(std::string, lr_schedule);
ABSL_DECLARE_FLAG(int64_t, decay_steps);
ABSL_DECLARE_FLAG(std::string, staleness_lr);
ABSL_DECLARE_FLAG(std::string, port_file);
ABSL_DECLARE_FLAG(int64_t, table_memory_budget);
ABSL_DECLARE_FLAG(std::string, table_dir);
ABSL_DECLARE_FLAG(std::string, table_admission);
ABSL_DECLARE_FLAG(int64_t, admission_bloom_bytes);
ABSL_DECLARE_FLAG(int64_t, table_ttl_steps);
ABSL_DECLARE_FLAG(int64_t, table_ttl_secs);
ABSL_DECLARE_FLAG(double, table_evict_l2_below);
ABSL_DECLARE_FLAG(int64_t, table_parallel_ids);
ABSL_DECLARE_FLAG(std::string, restore_from);
ABSL_DECLARE_FLAG(int, restore_shards);
ABSL_DECLARE_FLAG(std::string, restore_tables_from);
ABSL_DECLARE_FLAG(int, restore_tables_shards);

namespace ps {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

TEST(ServerOptionsFromFlags, TheDefaultFlagsGiveValidOptions) {
  absl::FlagSaver saver;
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->Validate().ok()) << o->Validate();
  EXPECT_EQ(o->listen, "127.0.0.1:50051");
  EXPECT_EQ(o->shard.mode, Mode::kSync);
  EXPECT_EQ(o->shard.default_wait, absl::Seconds(120));
  EXPECT_EQ(o->security.reload_interval, absl::Seconds(10));
}

TEST(ServerOptionsFromFlags, ATableBudgetNeedsADirectoryThatCanBeMade) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_table_memory_budget, 1 << 20);
  EXPECT_THAT(Message(ServerOptionsFromFlags().status()), HasSubstr("needs --table_dir"));
  const std::string tmp =
      std::getenv("TEST_TMPDIR") != nullptr ? std::getenv("TEST_TMPDIR") : "/tmp";
  const std::string file = tmp + "/table_dir_is_a_file";
  std::ofstream(file) << "x";
  absl::SetFlag(&FLAGS_table_dir, file + "/tier");
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  EXPECT_EQ(o.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(Message(o.status()), HasSubstr(file + "/tier"));
  absl::SetFlag(&FLAGS_table_dir, tmp + "/tier");
  o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shard.tables.memory_budget_bytes, 1 << 20);
  EXPECT_TRUE(o->shard.tables.make_tier != nullptr);
  absl::SetFlag(&FLAGS_table_memory_budget, 0);
  EXPECT_THAT(Message(ServerOptionsFromFlags().status()),
              HasSubstr("--table_dir needs --table_memory_budget"));
}

TEST(ServerOptionsFromFlags, TableAdmissionSetsEveryTableAndNamedOnes) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_table_admission, "count:2,ads=bloom:3");
  absl::SetFlag(&FLAGS_admission_bloom_bytes, 4096);
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(AdmissionToString(o->shard.tables.admission), "count:2");
  ASSERT_EQ(o->shard.tables.admission_by_table.count("ads"), 1u);
  EXPECT_EQ(AdmissionToString(o->shard.tables.admission_by_table.at("ads")), "bloom:3");
  EXPECT_EQ(o->shard.tables.admission_by_table.at("ads").bloom_bytes, 4096);
  for (const char* bad : {"count:2,ads=bloom:3,ads=count:2", "=count:2", "ads=bloom:99", "often"}) {
    absl::SetFlag(&FLAGS_table_admission, bad);
    EXPECT_THAT(Message(ServerOptionsFromFlags().status()), HasSubstr("--table_admission")) << bad;
  }
  absl::SetFlag(&FLAGS_table_admission, "bloom:2");
  absl::SetFlag(&FLAGS_admission_bloom_bytes, 0);
  EXPECT_THAT(Message(ServerOptionsFromFlags().status()), HasSubstr("bytes"));
}

TEST(ServerOptionsFromFlags, TableTtlIsInStepsOrSecondsNotBoth) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_table_ttl_steps, 100);
  absl::SetFlag(&FLAGS_table_evict_l2_below, 0.01);
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shard.tables.ttl_steps, 100);
  EXPECT_FLOAT_EQ(o->shard.tables.min_l2, 0.01f);
  absl::SetFlag(&FLAGS_table_ttl_secs, 60);
  o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok());  // checked where the shard is made (Shard::Create)
  EXPECT_THAT(Message(o->shard.tables.Validate()), HasSubstr("at most one"));
  absl::SetFlag(&FLAGS_table_ttl_steps, 0);
  absl::SetFlag(&FLAGS_table_evict_l2_below, -1);
  EXPECT_THAT(Message(ServerOptionsFromFlags()->shard.tables.Validate()),
              HasSubstr("--table_evict_l2_below"));
}

TEST(ServerOptionsFromFlags, TableParallelIdsReachesTheTablesAndIsChecked) {
  absl::FlagSaver saver;
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shard.tables.parallel_ids, EmbeddingTableOptions::kDefaultParallelIds);
  absl::SetFlag(&FLAGS_table_parallel_ids, 512);
  o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shard.tables.parallel_ids, 512);
  EXPECT_EQ(o->shard.tables.Validate(), absl::OkStatus());
  absl::SetFlag(&FLAGS_table_parallel_ids, -1);
  EXPECT_THAT(Message(ServerOptionsFromFlags()->shard.tables.Validate()),
              HasSubstr("--table_parallel_ids"));
}

TEST(ServerOptionsFromFlags, ConvertsSecondsAndSharedSecurityFlags) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_pull_timeout, 2.5);
  absl::SetFlag(&FLAGS_tls_reload_secs, 3);
  absl::SetFlag(&FLAGS_tls_cert, "server.pem");
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shard.default_wait, absl::Milliseconds(2500));
  EXPECT_EQ(o->shard.max_wait, absl::Milliseconds(2500));
  EXPECT_EQ(o->security.reload_interval, absl::Seconds(3));
  EXPECT_EQ(o->security.tls_cert, "server.pem");
}

TEST(ServerOptionsFromFlags, RefusesAnUnknownMode) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_mode, "fast");
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(Message(o.status()), HasSubstr("unknown mode 'fast'"));
}

TEST(ServerOptionsFromFlags, TakesSspWithItsStaleness) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_mode, "ssp");
  absl::SetFlag(&FLAGS_staleness, 1);
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->shard.mode, Mode::kSsp);
  EXPECT_EQ(o->shard.staleness, 1);
  EXPECT_TRUE(o->Validate().ok()) << o->Validate();
}

TEST(ServerOptionsFromFlags, RefusesStalenessWithAnotherMode) {
  for (const char* mode : {"sync", "async"}) {
    absl::FlagSaver saver;
    absl::SetFlag(&FLAGS_mode, mode);
    absl::SetFlag(&FLAGS_staleness, 3);  // even the default, once given
    absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
    ASSERT_FALSE(o.ok()) << mode;
    EXPECT_THAT(Message(o.status()), HasSubstr("--staleness applies to --mode=ssp only")) << mode;
  }
}

TEST(ServerOptionsFromFlags, ConvertsTheOptimizerFlags) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_optimizer, "adamw");
  absl::SetFlag(&FLAGS_lr, 0.001);
  absl::SetFlag(&FLAGS_beta2, 0.98);
  absl::SetFlag(&FLAGS_weight_decay, 0.01);
  absl::SetFlag(&FLAGS_lr_schedule, "cosine");
  absl::SetFlag(&FLAGS_staleness_lr, "inverse");
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_TRUE(o->Validate().ok()) << o->Validate();
  EXPECT_EQ(o->shard.optimizer.name, "adamw");
  EXPECT_EQ(o->shard.optimizer.learning_rate, 0.001);
  EXPECT_EQ(o->shard.optimizer.beta2, 0.98);
  EXPECT_EQ(o->shard.optimizer.weight_decay, 0.01);
  EXPECT_EQ(o->shard.optimizer.schedule.name, "cosine");
  EXPECT_EQ(o->shard.staleness_lr, StalenessLr::kInverse);
}

TEST(ServerOptionsFromFlags, RefusesAnUnknownStalenessLr) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_staleness_lr, "sqrt");
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_FALSE(o.ok());
  EXPECT_THAT(Message(o.status()), HasSubstr("--staleness_lr 'sqrt'"));
}

// What PsServer::Start refuses (the binary exits 2 with the message).
TEST(ServerOptionsFromFlags, BadOptimizerFlagsAreRefusedNamingTheFlag) {
  struct Case {
    void (*change)();
    const char* message;
  };
  const Case cases[] = {
      {[] { absl::SetFlag(&FLAGS_optimizer, "lion"); }, "unknown --optimizer 'lion'"},
      {[] { absl::SetFlag(&FLAGS_lr, 0); }, "--lr must be a positive number"},
      {[] { absl::SetFlag(&FLAGS_lr, -1); }, "--lr must be a positive number"},
      {[] { absl::SetFlag(&FLAGS_beta1, 1); }, "--beta1 must be in [0, 1)"},
      {[] { absl::SetFlag(&FLAGS_beta2, -0.1); }, "--beta2 must be in [0, 1)"},
      {[] { absl::SetFlag(&FLAGS_eps, 0); }, "--eps must be > 0"},
      {[] { absl::SetFlag(&FLAGS_momentum, -1); }, "--momentum must be >= 0"},
      {[] { absl::SetFlag(&FLAGS_weight_decay, -1); }, "--weight_decay must be >= 0"},
      {[] { absl::SetFlag(&FLAGS_lr_schedule, "linear"); }, "unknown --lr_schedule 'linear'"},
      {[] { absl::SetFlag(&FLAGS_decay_steps, 0); }, "--decay_steps must be >= 1"},
  };
  for (const Case& c : cases) {
    absl::FlagSaver saver;
    c.change();
    absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
    ASSERT_TRUE(o.ok()) << o.status();
    const absl::Status s = o->shard.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(Message(s), HasSubstr(c.message));
  }
}

TEST(ServerOptionsValidate, NamesTheFlagOfEachBadValue) {
  struct Case {
    void (*change)(ServerOptions&);
    const char* message;
  };
  const Case cases[] = {
      {[](ServerOptions& o) { o.shard.spec_limits.max_model_elements = 0; },
       "--max_model_elements and --max_tensor_elements must be in [1, 2^40]"},
      {[](ServerOptions& o) { o.shard.spec_limits.max_tensors = 1 << 16; },
       "--max_tensors must be in [1, 65536)"},
      {[](ServerOptions& o) { o.shard.spec_limits.max_name_bytes = 0; },
       "--max_name_bytes must be in [1, 2^20]"},
      {[](ServerOptions& o) { o.shard.stall_report_after = absl::Seconds(-1); },
       "--stall_report_after must be >= 0"},
      {[](ServerOptions& o) { o.service.call_timeout = absl::Seconds(-1); },
       "--call_timeout must be >= 0"},
      {[](ServerOptions& o) { o.shutdown_grace = absl::Seconds(-1); },
       "--shutdown_grace must be >= 0"},
      {[](ServerOptions& o) { o.max_concurrent_streams = 0; },
       "--max_concurrent_streams must be >= 1"},
      {[](ServerOptions& o) { o.checkpoints.keep = 0; }, "--checkpoint_keep >= 1"},
      {[](ServerOptions& o) { o.checkpoints.full_every = 0; }, "--checkpoint_full_every >= 1"},
      {[](ServerOptions& o) {
         o.shard.mode = Mode::kAsync;
         o.shard.sync_rule.quorum = 1;
       },
       "--sync_quorum and --min_workers apply to --mode=sync only"},
      {[](ServerOptions& o) {
         o.shard.mode = Mode::kSsp;
         o.shard.staleness = -1;
       },
       "--staleness must be >= 0, got -1"},
  };
  for (const Case& c : cases) {
    ServerOptions o;
    ASSERT_TRUE(o.Validate().ok());
    c.change(o);
    const absl::Status s = o.Validate();
    EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.message;
    EXPECT_THAT(Message(s), HasSubstr(c.message));
  }
}

TEST(PsServerStart, RefusesInvalidOptionsBeforeListening) {
  ServerOptions o;
  o.listen = "127.0.0.1:0";
  o.max_concurrent_streams = 0;
  absl::StatusOr<std::unique_ptr<PsServer>> server = PsServer::Start(o);
  ASSERT_FALSE(server.ok());
  EXPECT_THAT(Message(server.status()), HasSubstr("--max_concurrent_streams must be >= 1"));
}

TEST(PortFile, IsWrittenWholeByRenameAndReadFromItsFlag) {
  absl::FlagSaver saver;
  const std::string dir = ::testing::TempDir();
  const std::string path = dir + "/server.port";
  absl::SetFlag(&FLAGS_port_file, path);
  EXPECT_EQ(PortFileFromFlags(), path);
  ASSERT_TRUE(WritePortFile(path, "127.0.0.1:4321").ok());
  std::ifstream in(path);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(text, "127.0.0.1:4321\n");
  EXPECT_FALSE(std::ifstream(path + ".tmp").good()) << "the temporary file was left behind";
  const absl::Status s = WritePortFile(dir + "/no/such/folder/server.port", "127.0.0.1:1");
  EXPECT_EQ(s.code(), absl::StatusCode::kInternal);
  EXPECT_THAT(Message(s), HasSubstr("cannot write --port_file="));
}

TEST(DescribeServer, SaysWhatEachModeRunsWith) {
  ServerOptions o;
  o.shard.num_workers = 3;
  o.shard.worker_timeout = absl::Seconds(10);
  ServerDescription d = DescribeServer(o, "127.0.0.1:50051", "", "");
  EXPECT_THAT(d.config, HasSubstr("shard 0/1, sync mode, 3 workers, lr 0.1, optimizer sgd, "));
  EXPECT_THAT(d.config, HasSubstr("steps close with every live worker's gradient"));
  EXPECT_THAT(d.config, HasSubstr("worker lease 10s"));
  EXPECT_THAT(d.config, Not(HasSubstr("staleness lr")));
  o.shard.sync_rule.quorum = 2;
  o.shard.worker_timeout = absl::ZeroDuration();
  d = DescribeServer(o, "127.0.0.1:50051", "", "");
  EXPECT_THAT(d.config, HasSubstr("steps close with the first 2 gradients, worker lease off"));
  o.shard.sync_rule.quorum = 0;
  o.shard.mode = Mode::kSsp;
  o.shard.staleness = 1;
  d = DescribeServer(o, "127.0.0.1:50051", "", "");
  EXPECT_THAT(d.config, HasSubstr("ssp mode"));
  EXPECT_THAT(d.config, HasSubstr("staleness lr none"));
  EXPECT_THAT(d.config, HasSubstr("at most 1 steps ahead of the slowest live worker"));
  EXPECT_THAT(d.config, Not(HasSubstr("steps close with")));
}

TEST(DescribeServer, WarnsOfSecurityThatIsNotAsItShouldBe) {
  ServerOptions o;
  ServerDescription d = DescribeServer(o, "127.0.0.1:50051", "", "");
  EXPECT_EQ(d.security, "security: plaintext");
  EXPECT_EQ(d.access, "");
  EXPECT_THAT(d.warning, HasSubstr("WARNING: serving in plaintext on loopback"));
  EXPECT_THAT(d.warning, HasSubstr("anyone who can reach 127.0.0.1:50051"));

  d = DescribeServer(o, "unix:/run/ps/shard-0.sock", "", "");
  EXPECT_EQ(d.security, "security: plaintext on a unix socket");
  EXPECT_THAT(d.access, HasSubstr("unix socket: any process of this user (uid "));
  EXPECT_EQ(d.warning, "");

  o.security.insecure = true;
  d = DescribeServer(o, "unix:/run/ps/shard-0.sock", "", "");
  EXPECT_EQ(d.access, "");
  EXPECT_THAT(d.warning, HasSubstr("(--insecure), and the socket's folder was not checked"));

  o.security = SecurityOptions();
  o.security.tls_cert = "server.pem";
  o.security.tls_key = "server.key";
  d = DescribeServer(o, "10.0.0.1:50051", "", "127.0.0.1:9090");
  EXPECT_EQ(d.security, "security: TLS; metrics on https://127.0.0.1:9090/metrics");
  EXPECT_THAT(d.warning, HasSubstr("TLS without --tls_ca or --auth_token_file"));

  o.security.tls_ca = "ca.pem";
  o.security.auth_token_file = "tokens";
  d = DescribeServer(o, "10.0.0.1:50051", "0.0.0.0:8081", "");
  EXPECT_EQ(d.security,
            "security: mutual TLS + bearer tokens; health probes (plaintext) on 0.0.0.0:8081");
  EXPECT_EQ(d.warning, "");
}

TEST(ServerOptionsFromFlags, RestoreFromAnotherShardCountWholeOrTablesOnly) {
  absl::FlagSaver saver;
  absl::SetFlag(&FLAGS_restore_from, "/ckpt");
  absl::SetFlag(&FLAGS_restore_shards, 2);
  absl::StatusOr<ServerOptions> o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->checkpoints.restore_from, "/ckpt");
  EXPECT_EQ(o->checkpoints.restore_from_shards, 2);
  EXPECT_FALSE(o->checkpoints.tables_only);
  absl::SetFlag(&FLAGS_restore_tables_from, "/other");
  EXPECT_THAT(Message(ServerOptionsFromFlags().status()), HasSubstr("not both"));
  absl::SetFlag(&FLAGS_restore_from, "");
  absl::SetFlag(&FLAGS_restore_tables_shards, 3);
  o = ServerOptionsFromFlags();
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->checkpoints.restore_from, "/other");
  EXPECT_EQ(o->checkpoints.restore_from_shards, 3);
  EXPECT_TRUE(o->checkpoints.tables_only);
  // A directory without its shard count is refused where the server starts.
  absl::SetFlag(&FLAGS_restore_tables_from, "");
  absl::SetFlag(&FLAGS_restore_from, "/ckpt");
  absl::SetFlag(&FLAGS_restore_shards, 0);
  EXPECT_THAT(Message(ServerOptionsFromFlags()->Validate()),
              HasSubstr("--restore_from and --restore_shards (>= 1) go together"));
}

}  // namespace
}  // namespace ps
