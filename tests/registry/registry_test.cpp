// Registry on real SQLite files: everything survives a close and reopen; every
// refusal carries the right code and names the thing; listing, filtering,
// states and scenario repointing.
#include "registry/registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "registry/sqlite_db.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate {
namespace {

using testing::adapter;
using testing::base_model;

class RegistryTest : public testing::TempDirTest {
 protected:
  std::unique_ptr<Registry> open_registry() {
    auto reg = Registry::open(path("registry.db"));
    EXPECT_TRUE(reg.is_ok()) << reg.status().to_string();
    return reg.is_ok() ? std::move(reg).value() : nullptr;
  }

  // Two bases, three adapters, two scenarios: the state most tests start from.
  void populate(Registry& reg) {
    ASSERT_TRUE(reg.upsert_base_model(base_model("llama-a")).is_ok());
    ASSERT_TRUE(reg.upsert_base_model(base_model("llama-b", BaseModelState::kCandidate)).is_ok());
    ASSERT_TRUE(reg.add_adapter(adapter("sql", "llama-a", 8)).is_ok());
    ASSERT_TRUE(reg.add_adapter(adapter("chat", "llama-a", 16)).is_ok());
    ASSERT_TRUE(reg.add_adapter(adapter("sql-b", "llama-b", 4)).is_ok());
    ASSERT_TRUE(reg.set_scenario("text2sql", "llama-a", "sql").is_ok());
    ASSERT_TRUE(reg.set_scenario("text2sql", "llama-b", "sql-b").is_ok());
  }
};

TEST_F(RegistryTest, EverythingIsRestoredAfterReopen) {
  const auto before_open = std::chrono::system_clock::now();
  {
    auto reg = open_registry();
    ASSERT_NE(reg, nullptr);
    populate(*reg);
  }  // closed
  auto reg = open_registry();
  ASSERT_NE(reg, nullptr);

  auto bases = reg->list_base_models();
  ASSERT_TRUE(bases.is_ok()) << bases.status().to_string();
  ASSERT_EQ(bases->size(), 2u);
  EXPECT_EQ((*bases)[0].name, "llama-a");
  EXPECT_EQ((*bases)[0].path, "/models/llama-a");
  EXPECT_EQ((*bases)[0].state, BaseModelState::kOnline);
  EXPECT_EQ((*bases)[1].name, "llama-b");
  EXPECT_EQ((*bases)[1].state, BaseModelState::kCandidate);

  auto adapters = reg->list_adapters();
  ASSERT_TRUE(adapters.is_ok()) << adapters.status().to_string();
  ASSERT_EQ(adapters->size(), 3u);
  const AdapterRecord expected = adapter("chat", "llama-a", 16);
  const AdapterRecord& chat = (*adapters)[0];  // sorted by name
  EXPECT_EQ(chat.name, "chat");
  EXPECT_EQ(chat.base_model, "llama-a");
  EXPECT_EQ(chat.path, expected.path);
  EXPECT_EQ(chat.rank, 16);
  EXPECT_DOUBLE_EQ(chat.alpha, 32.0);
  EXPECT_EQ(chat.target_modules, (std::vector<std::string>{"q_proj", "v_proj"}));
  EXPECT_EQ(chat.sha256, sha256_hex("chat"));
  EXPECT_EQ(chat.size_bytes, 16000);
  EXPECT_EQ(chat.state, AdapterState::kReady);
  const int64_t opened_at =
      std::chrono::duration_cast<std::chrono::seconds>(before_open.time_since_epoch()).count();
  EXPECT_GE(chat.created_at, opened_at);
  EXPECT_LE(chat.created_at, opened_at + 60);
  EXPECT_EQ(chat.updated_at, chat.created_at);
  EXPECT_EQ((*adapters)[1].name, "sql");
  EXPECT_EQ((*adapters)[2].name, "sql-b");

  auto scenarios = reg->list_scenarios();
  ASSERT_TRUE(scenarios.is_ok());
  ASSERT_EQ(scenarios->size(), 2u);
  EXPECT_EQ((*scenarios)[0].base_model, "llama-a");
  EXPECT_EQ((*scenarios)[0].adapter, "sql");
  EXPECT_EQ((*scenarios)[1].base_model, "llama-b");
  EXPECT_EQ((*scenarios)[1].adapter, "sql-b");
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-a").value(), "sql");
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-b").value(), "sql-b");
}

TEST_F(RegistryTest, ListsFilterByBaseModel) {
  auto reg = open_registry();
  populate(*reg);
  auto a = reg->list_adapters("llama-a");
  ASSERT_TRUE(a.is_ok());
  ASSERT_EQ(a->size(), 2u);
  EXPECT_EQ((*a)[0].name, "chat");
  EXPECT_EQ((*a)[1].name, "sql");
  EXPECT_EQ(reg->list_adapters("llama-b")->size(), 1u);
  EXPECT_TRUE(reg->list_adapters("no-such-base")->empty());
  EXPECT_EQ(reg->list_scenarios("llama-b")->size(), 1u);
  EXPECT_EQ(reg->list_scenarios("llama-b")->at(0).adapter, "sql-b");
  EXPECT_TRUE(reg->list_scenarios("no-such-base")->empty());
}

TEST_F(RegistryTest, AddAdapterReturnsTheStoredRecord) {
  auto reg = open_registry();
  ASSERT_TRUE(reg->upsert_base_model(base_model("llama-a")).is_ok());
  AdapterRecord in = adapter("sql", "llama-a");
  in.created_at = 5;  // ignored: the registry stamps its own times
  in.target_modules = {};
  in.sha256 = "";     // unknown digest is allowed
  auto stored = reg->add_adapter(in);
  ASSERT_TRUE(stored.is_ok()) << stored.status().to_string();
  EXPECT_GT(stored->created_at, 1000000000);
  EXPECT_TRUE(stored->target_modules.empty());
  EXPECT_EQ(stored->sha256, "");
  auto got = reg->get_adapter("sql");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->created_at, stored->created_at);
  EXPECT_EQ(got->path, in.path);
}

TEST_F(RegistryTest, UpsertBaseModelUpdatesPathAndStateKeepingCreatedAt) {
  auto reg = open_registry();
  auto first = reg->upsert_base_model(base_model("llama-a", BaseModelState::kCandidate));
  ASSERT_TRUE(first.is_ok());
  BaseModelRecord changed = base_model("llama-a", BaseModelState::kOnline);
  changed.path = "/models/elsewhere";
  auto second = reg->upsert_base_model(changed);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->created_at, first->created_at);
  EXPECT_GE(second->updated_at, first->updated_at);
  auto got = reg->get_base_model("llama-a");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->path, "/models/elsewhere");
  EXPECT_EQ(got->state, BaseModelState::kOnline);
  EXPECT_EQ(reg->list_base_models()->size(), 1u);
  EXPECT_STATUS(reg->get_base_model("nope").status(), StatusCode::kNotFound, "'nope'");
}

TEST_F(RegistryTest, DuplicateAdapterNameIsRefused) {
  auto reg = open_registry();
  populate(*reg);
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "llama-a")).status(), StatusCode::kInvalidArgument,
                "adapter 'sql' already exists");
  // Names are unique across bases too.
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "llama-b")).status(), StatusCode::kInvalidArgument,
                "adapter 'sql' already exists");
  EXPECT_EQ(reg->list_adapters()->size(), 3u);
}

TEST_F(RegistryTest, AdapterOfUnknownBaseModelIsRefused) {
  auto reg = open_registry();
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "ghost-base")).status(), StatusCode::kNotFound,
                "base model 'ghost-base'");
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "ghost-base")).status(), StatusCode::kNotFound, "'sql'");
  EXPECT_TRUE(reg->list_adapters()->empty());
}

TEST_F(RegistryTest, MalformedRecordsAreRefusedNamingTheField) {
  auto reg = open_registry();
  ASSERT_TRUE(reg->upsert_base_model(base_model("llama-a")).is_ok());
  AdapterRecord r = adapter("bad", "llama-a");
  r.rank = 0;
  EXPECT_STATUS(reg->add_adapter(r).status(), StatusCode::kInvalidArgument, "rank");
  r = adapter("bad", "llama-a");
  r.alpha = -1;
  EXPECT_STATUS(reg->add_adapter(r).status(), StatusCode::kInvalidArgument, "alpha");
  r = adapter("bad", "llama-a");
  r.sha256 = "ABC";
  EXPECT_STATUS(reg->add_adapter(r).status(), StatusCode::kInvalidArgument, "sha256");
  r = adapter("bad", "llama-a");
  r.path = "";
  EXPECT_STATUS(reg->add_adapter(r).status(), StatusCode::kInvalidArgument, "path");
  r = adapter("bad", "llama-a");
  r.size_bytes = -1;
  EXPECT_STATUS(reg->add_adapter(r).status(), StatusCode::kInvalidArgument, "size_bytes");
  EXPECT_STATUS(reg->add_adapter(adapter("", "llama-a")).status(), StatusCode::kInvalidArgument,
                "adapter name is empty");
  EXPECT_STATUS(reg->add_adapter(adapter("a/b", "llama-a")).status(), StatusCode::kInvalidArgument, "'a/b'");
  EXPECT_STATUS(reg->add_adapter(adapter("a b", "llama-a")).status(), StatusCode::kInvalidArgument, "'a b'");
  EXPECT_STATUS(reg->add_adapter(adapter(std::string(300, 'x'), "llama-a")).status(),
                StatusCode::kInvalidArgument, "longer than");
  BaseModelRecord b = base_model("org/model");  // a slash is fine in a base model name
  EXPECT_TRUE(reg->upsert_base_model(b).is_ok());
  b.path = "";
  EXPECT_STATUS(reg->upsert_base_model(b).status(), StatusCode::kInvalidArgument, "'org/model' has no path");
  EXPECT_TRUE(reg->list_adapters()->empty());
}

TEST_F(RegistryTest, NotFoundCasesNameTheThing) {
  auto reg = open_registry();
  populate(*reg);
  EXPECT_STATUS(reg->get_adapter("ghost").status(), StatusCode::kNotFound, "adapter 'ghost' not found");
  EXPECT_STATUS(reg->remove_adapter("ghost"), StatusCode::kNotFound, "adapter 'ghost' not found");
  EXPECT_STATUS(reg->set_adapter_state("ghost", AdapterState::kFailed), StatusCode::kNotFound, "'ghost'");
  EXPECT_STATUS(reg->set_adapter_state("ghost", AdapterState::kRemoving), StatusCode::kNotFound, "'ghost'");
  EXPECT_STATUS(reg->remove_scenario("ghost-scn", "llama-a"), StatusCode::kNotFound, "scenario 'ghost-scn'");
  EXPECT_STATUS(reg->remove_scenario("text2sql", "ghost-base"), StatusCode::kNotFound, "'ghost-base'");
  EXPECT_STATUS(reg->resolve_scenario("ghost-scn", "llama-a").status(), StatusCode::kNotFound,
                "scenario 'ghost-scn' not found on base model 'llama-a'");
  EXPECT_STATUS(reg->resolve_scenario("text2sql", "ghost-base").status(), StatusCode::kNotFound, "'ghost-base'");
}

TEST_F(RegistryTest, ScenarioWithUnknownAdapterIsRefused) {
  auto reg = open_registry();
  populate(*reg);
  const Status st = reg->set_scenario("summarise", "llama-a", "ghost").status();
  EXPECT_STATUS(st, StatusCode::kNotFound, "adapter 'ghost' not found");
  EXPECT_STATUS(st, StatusCode::kNotFound, "scenario 'summarise'");
  EXPECT_EQ(reg->list_scenarios()->size(), 2u);
}

TEST_F(RegistryTest, ScenarioWithAdapterOfAnotherBaseIsRefused) {
  auto reg = open_registry();
  populate(*reg);
  const Status st = reg->set_scenario("text2sql", "llama-a", "sql-b").status();
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "adapter 'sql-b'");
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "belongs to base model 'llama-b', not 'llama-a'");
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-a").value(), "sql");  // unchanged
}

TEST_F(RegistryTest, RemovingAnAdapterUsedByAScenarioIsRefusedNamingIt) {
  auto reg = open_registry();
  populate(*reg);
  ASSERT_TRUE(reg->set_scenario("reports", "llama-a", "sql").is_ok());
  const Status st = reg->remove_adapter("sql");
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "adapter 'sql'");
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "'reports'");
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "'text2sql'");
  EXPECT_STATUS(reg->set_adapter_state("sql", AdapterState::kRemoving), StatusCode::kInvalidArgument,
                "'text2sql'");
  EXPECT_EQ(reg->get_adapter("sql")->state, AdapterState::kReady);

  // Once no scenario points at it, it goes.
  ASSERT_TRUE(reg->set_scenario("text2sql", "llama-a", "chat").is_ok());
  ASSERT_OK(reg->remove_scenario("reports", "llama-a"));
  ASSERT_OK(reg->set_adapter_state("sql", AdapterState::kRemoving));
  ASSERT_OK(reg->remove_adapter("sql"));
  EXPECT_EQ(reg->get_adapter("sql").status().code(), StatusCode::kNotFound);
  EXPECT_STATUS(reg->remove_adapter("sql"), StatusCode::kNotFound, "'sql'");
  // The name is free again.
  EXPECT_TRUE(reg->add_adapter(adapter("sql", "llama-a")).is_ok());
}

TEST_F(RegistryTest, ScenarioNeedsAReadyAdapter) {
  auto reg = open_registry();
  populate(*reg);
  ASSERT_OK(reg->set_adapter_state("chat", AdapterState::kFailed));
  EXPECT_EQ(reg->get_adapter("chat")->state, AdapterState::kFailed);
  EXPECT_STATUS(reg->set_scenario("support", "llama-a", "chat").status(), StatusCode::kInvalidArgument,
                "failed, not ready");
  ASSERT_OK(reg->set_adapter_state("chat", AdapterState::kRemoving));
  EXPECT_STATUS(reg->set_scenario("support", "llama-a", "chat").status(), StatusCode::kInvalidArgument,
                "removing, not ready");
  ASSERT_OK(reg->set_adapter_state("chat", AdapterState::kReady));
  EXPECT_TRUE(reg->set_scenario("support", "llama-a", "chat").is_ok());
}

TEST_F(RegistryTest, SetScenarioRepointsAndKeepsCreatedAt) {
  auto reg = open_registry();
  populate(*reg);
  auto before = reg->list_scenarios("llama-a");
  ASSERT_EQ(before->size(), 1u);
  auto after = reg->set_scenario("text2sql", "llama-a", "chat");
  ASSERT_TRUE(after.is_ok()) << after.status().to_string();
  EXPECT_EQ(after->adapter, "chat");
  EXPECT_EQ(after->created_at, before->at(0).created_at);
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-a").value(), "chat");
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-b").value(), "sql-b");  // other base untouched
  EXPECT_EQ(reg->list_scenarios()->size(), 2u);
  EXPECT_STATUS(reg->set_scenario("a/b", "llama-a", "chat").status(), StatusCode::kInvalidArgument, "'a/b'");
}

TEST_F(RegistryTest, UnreadableStoredValuesAreCorruptNamingTheRow) {
  {
    auto reg = open_registry();
    populate(*reg);
  }
  {
    auto db = SqliteDb::open(path("registry.db"));
    ASSERT_TRUE(db.is_ok());
    ASSERT_OK((*db)->exec("UPDATE adapters SET state = 'zombie' WHERE name = 'chat';"
                          "UPDATE adapters SET target_modules = '{not json' WHERE name = 'sql';"
                          "UPDATE base_models SET state = 'asleep' WHERE name = 'llama-b'"));
  }
  auto reg = open_registry();
  EXPECT_STATUS(reg->get_adapter("chat").status(), StatusCode::kCorrupt, "adapter 'chat'");
  EXPECT_STATUS(reg->get_adapter("chat").status(), StatusCode::kCorrupt, "'zombie'");
  EXPECT_STATUS(reg->get_adapter("sql").status(), StatusCode::kCorrupt, "target_modules");
  EXPECT_STATUS(reg->list_adapters().status(), StatusCode::kCorrupt, "registry.db");
  EXPECT_STATUS(reg->list_base_models().status(), StatusCode::kCorrupt, "'asleep'");
  EXPECT_TRUE(reg->get_adapter("sql-b").is_ok());  // the healthy rows still read
}

TEST_F(RegistryTest, InMemoryRegistryWorks) {
  auto reg = Registry::open(":memory:");
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  populate(**reg);
  EXPECT_EQ((*reg)->resolve_scenario("text2sql", "llama-a").value(), "sql");
}

TEST_F(RegistryTest, MissingDirectoryIsAnIoErrorNamingThePath) {
  const std::string bad = path("no/such/dir/registry.db");
  auto reg = Registry::open(bad);
  EXPECT_STATUS(reg.status(), StatusCode::kIoError, bad);
}

}  // namespace
}  // namespace loragate
