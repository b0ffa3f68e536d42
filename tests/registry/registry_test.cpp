// Registry on real SQLite files and PostgreSQL databases (RegistryBackendsTest;
// the SQLite-only cases are RegistryTest): everything survives a close and reopen; every
// refusal carries the right code and names the thing and its base; listing,
// filtering, states, scenario repointing, one adapter name on several bases,
// and base swaps (promote, rollback, history).
#include "registry/registry.h"

#include <gtest/gtest.h>

#include <chrono>
#include <string>
#include <vector>

#include "registry/sqlite_db.h"
#include "tests/registry/pg_server.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate {
namespace {

using testing::adapter;
using testing::base_model;
using testing::swap_to;

// The state of every base, by name: "a=serving b=candidate".
std::string base_states(Registry& reg) {
  auto bases = reg.list_base_models();
  if (!bases.is_ok()) return bases.status().to_string();
  std::string out;
  for (const BaseModelRecord& b : *bases) {
    if (!out.empty()) out += " ";
    out += b.name;
    out += "=";
    out += base_model_state_name(b.state);
  }
  return out;
}

class RegistryTest : public testing::RegistryLocationTest {
 protected:
  std::unique_ptr<Registry> open_registry() {
    auto reg = Registry::open(location("registry.db"));
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

// The tests that hold on either backend.
class RegistryBackendsTest : public testing::OnBothBackends<RegistryTest> {};

TEST_P(RegistryBackendsTest, EverythingIsRestoredAfterReopen) {
  const auto before_open = std::chrono::system_clock::now();
  {
    auto reg = open_registry();
    ASSERT_NE(reg, nullptr);
    populate(*reg);
    BaseModelRecord c = base_model("llama-c", BaseModelState::kFailed);
    c.dtype = "bf16";
    c.sha256 = sha256_hex("llama-c weights");
    c.error = "config.json: unknown architecture";
    ASSERT_TRUE(reg->upsert_base_model(c).is_ok());
    SwapRecord s = swap_to("llama-b", "llama-a");
    s.forced = true;
    s.note = "missing: chat";
    ASSERT_TRUE(reg->record_swap(s).is_ok());
  }  // closed
  auto reg = open_registry();
  ASSERT_NE(reg, nullptr);

  auto bases = reg->list_base_models();
  ASSERT_TRUE(bases.is_ok()) << bases.status().to_string();
  ASSERT_EQ(bases->size(), 3u);
  EXPECT_EQ((*bases)[0].name, "llama-a");
  EXPECT_EQ((*bases)[0].path, "/models/llama-a");
  EXPECT_EQ((*bases)[0].state, BaseModelState::kPrevious);
  EXPECT_EQ((*bases)[0].dtype, "f32");
  EXPECT_EQ((*bases)[0].sha256, "");
  EXPECT_EQ((*bases)[0].error, "");
  EXPECT_EQ((*bases)[1].name, "llama-b");
  EXPECT_EQ((*bases)[1].state, BaseModelState::kServing);
  EXPECT_EQ((*bases)[2].name, "llama-c");
  EXPECT_EQ((*bases)[2].state, BaseModelState::kFailed);
  EXPECT_EQ((*bases)[2].dtype, "bf16");
  EXPECT_EQ((*bases)[2].sha256, sha256_hex("llama-c weights"));
  EXPECT_EQ((*bases)[2].error, "config.json: unknown architecture");

  auto swaps = reg->list_swaps();
  ASSERT_TRUE(swaps.is_ok()) << swaps.status().to_string();
  ASSERT_EQ(swaps->size(), 1u);
  EXPECT_EQ((*swaps)[0].to_base, "llama-b");
  EXPECT_EQ((*swaps)[0].from_base, "llama-a");
  EXPECT_EQ((*swaps)[0].actor, "admin");
  EXPECT_EQ((*swaps)[0].kind, "promote");
  EXPECT_TRUE((*swaps)[0].forced);
  EXPECT_EQ((*swaps)[0].note, "missing: chat");

  auto adapters = reg->list_adapters();
  ASSERT_TRUE(adapters.is_ok()) << adapters.status().to_string();
  ASSERT_EQ(adapters->size(), 3u);
  const AdapterRecord expected = adapter("chat", "llama-a", 16);
  const AdapterRecord& chat = (*adapters)[0];  // sorted by base model, then name
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

TEST_P(RegistryBackendsTest, ListsFilterByBaseModel) {
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

TEST_P(RegistryBackendsTest, AddAdapterReturnsTheStoredRecord) {
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
  auto got = reg->get_adapter("sql", "llama-a");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->created_at, stored->created_at);
  EXPECT_EQ(got->path, in.path);
}

TEST_P(RegistryBackendsTest, UpsertBaseModelUpdatesEveryFieldKeepingCreatedAt) {
  auto reg = open_registry();
  auto first = reg->upsert_base_model(base_model("llama-a", BaseModelState::kCandidate));
  ASSERT_TRUE(first.is_ok());
  EXPECT_EQ(first->dtype, "f32");
  BaseModelRecord changed = base_model("llama-a", BaseModelState::kServing);
  changed.path = "/models/elsewhere";
  changed.dtype = "bf16";
  changed.sha256 = sha256_hex("weights");
  changed.error = "ignored: the state is not failed";
  auto second = reg->upsert_base_model(changed);
  ASSERT_TRUE(second.is_ok());
  EXPECT_EQ(second->created_at, first->created_at);
  EXPECT_GE(second->updated_at, first->updated_at);
  auto got = reg->get_base_model("llama-a");
  ASSERT_TRUE(got.is_ok());
  EXPECT_EQ(got->path, "/models/elsewhere");
  EXPECT_EQ(got->state, BaseModelState::kServing);
  EXPECT_EQ(got->dtype, "bf16");
  EXPECT_EQ(got->sha256, sha256_hex("weights"));
  EXPECT_EQ(got->error, "");  // kept only for kFailed
  changed.state = BaseModelState::kFailed;
  changed.error = "weights changed on disk";
  ASSERT_TRUE(reg->upsert_base_model(changed).is_ok());
  EXPECT_EQ(reg->get_base_model("llama-a")->error, "weights changed on disk");
  EXPECT_EQ(reg->list_base_models()->size(), 1u);
  EXPECT_STATUS(reg->get_base_model("nope").status(), StatusCode::kNotFound, "'nope'");
}

TEST_P(RegistryBackendsTest, DuplicateAdapterOnOneBaseIsRefused) {
  auto reg = open_registry();
  populate(*reg);
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "llama-a")).status(), StatusCode::kAlreadyExists,
                "adapter 'sql' already exists on base model 'llama-a'");
  EXPECT_EQ(reg->list_adapters()->size(), 3u);
}

TEST_P(RegistryBackendsTest, SameAdapterNameOnTwoBasesCoexistsAndIsRemovedIndependently) {
  auto reg = open_registry();
  populate(*reg);
  AdapterRecord on_b = adapter("sql", "llama-b", 32);
  on_b.path = "/adapters/sql-retrained-for-b";
  ASSERT_TRUE(reg->add_adapter(on_b).is_ok());
  EXPECT_STATUS(reg->add_adapter(on_b).status(), StatusCode::kAlreadyExists,
                "adapter 'sql' already exists on base model 'llama-b'");

  auto all = reg->list_adapters();
  ASSERT_TRUE(all.is_ok());
  std::vector<std::string> keys;  // by base model, then name
  for (const AdapterRecord& a : *all) keys.push_back(a.base_model + "/" + a.name);
  EXPECT_EQ(keys, (std::vector<std::string>{"llama-a/chat", "llama-a/sql", "llama-b/sql", "llama-b/sql-b"}));
  EXPECT_EQ(reg->get_adapter("sql", "llama-a")->rank, 8);
  EXPECT_EQ(reg->get_adapter("sql", "llama-b")->rank, 32);
  EXPECT_EQ(reg->get_adapter("sql", "llama-b")->path, "/adapters/sql-retrained-for-b");

  // States are per base.
  ASSERT_OK(reg->set_adapter_state("sql", "llama-b", AdapterState::kFailed));
  EXPECT_EQ(reg->get_adapter("sql", "llama-a")->state, AdapterState::kReady);
  EXPECT_EQ(reg->get_adapter("sql", "llama-b")->state, AdapterState::kFailed);

  // llama-a's 'sql' is used by text2sql there; llama-b's is not, and goes alone.
  EXPECT_STATUS(reg->remove_adapter("sql", "llama-a"), StatusCode::kFailedPrecondition, "'text2sql'");
  ASSERT_OK(reg->remove_adapter("sql", "llama-b"));
  EXPECT_STATUS(reg->get_adapter("sql", "llama-b").status(), StatusCode::kNotFound,
                "adapter 'sql' not found on base model 'llama-b'");
  EXPECT_TRUE(reg->get_adapter("sql", "llama-a").is_ok());
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-a").value(), "sql");

  // And the other way round: llama-a's goes once its scenario moves, llama-b's comes back.
  ASSERT_TRUE(reg->add_adapter(on_b).is_ok());
  ASSERT_TRUE(reg->set_scenario("text2sql", "llama-a", "chat").is_ok());
  ASSERT_OK(reg->remove_adapter("sql", "llama-a"));
  EXPECT_EQ(reg->get_adapter("sql", "llama-a").status().code(), StatusCode::kNotFound);
  EXPECT_EQ(reg->get_adapter("sql", "llama-b")->rank, 32);
}

TEST_P(RegistryBackendsTest, ScenarioOnTheNewBasePointsAtTheNewBasesAdapter) {
  auto reg = open_registry();
  ASSERT_TRUE(reg->upsert_base_model(base_model("v1")).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("v2", BaseModelState::kCandidate)).is_ok());
  AdapterRecord sql_v1 = adapter("sql", "v1");
  AdapterRecord sql_v2 = adapter("sql", "v2", 16);
  sql_v2.path = "/adapters/v2/sql";
  ASSERT_TRUE(reg->add_adapter(sql_v1).is_ok());
  ASSERT_TRUE(reg->add_adapter(sql_v2).is_ok());
  ASSERT_TRUE(reg->set_scenario("text2sql", "v1", "sql").is_ok());
  auto on_v2 = reg->set_scenario("text2sql", "v2", "sql");
  ASSERT_TRUE(on_v2.is_ok()) << on_v2.status().to_string();
  EXPECT_EQ(on_v2->base_model, "v2");
  EXPECT_EQ(on_v2->adapter, "sql");
  EXPECT_EQ(reg->resolve_scenario("text2sql", "v2").value(), "sql");
  EXPECT_EQ(reg->get_adapter(reg->resolve_scenario("text2sql", "v2").value(), "v2")->path, "/adapters/v2/sql");
  // v2's adapter is in use by v2's scenario only.
  const Status st = reg->remove_adapter("sql", "v2");
  EXPECT_STATUS(st, StatusCode::kFailedPrecondition, "adapter 'sql' on base model 'v2'");
  EXPECT_STATUS(st, StatusCode::kFailedPrecondition, "'text2sql'");
  ASSERT_OK(reg->remove_scenario("text2sql", "v1"));
  ASSERT_OK(reg->remove_adapter("sql", "v1"));
  EXPECT_EQ(reg->resolve_scenario("text2sql", "v2").value(), "sql");
  EXPECT_STATUS(reg->set_scenario("text2sql", "v1", "sql").status(), StatusCode::kNotFound,
                "adapter 'sql' not found on base model 'v1'");
}

TEST_P(RegistryBackendsTest, AdapterOfUnknownRetiredOrFailedBaseModelIsRefused) {
  auto reg = open_registry();
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "ghost-base")).status(), StatusCode::kNotFound,
                "base model 'ghost-base'");
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "ghost-base")).status(), StatusCode::kNotFound, "'sql'");
  ASSERT_TRUE(reg->upsert_base_model(base_model("old", BaseModelState::kRetired)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("broken", BaseModelState::kFailed)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("new", BaseModelState::kLoading)).is_ok());
  const Status retired = reg->add_adapter(adapter("sql", "old")).status();
  EXPECT_STATUS(retired, StatusCode::kInvalidArgument, "adapter 'sql' to base model 'old'");
  EXPECT_STATUS(retired, StatusCode::kInvalidArgument, "retired");
  EXPECT_STATUS(reg->add_adapter(adapter("sql", "broken")).status(), StatusCode::kInvalidArgument, "failed");
  EXPECT_TRUE(reg->add_adapter(adapter("sql", "new")).is_ok());  // adapters may be staged on a loading base
  EXPECT_EQ(reg->list_adapters()->size(), 1u);
}

TEST_P(RegistryBackendsTest, MalformedRecordsAreRefusedNamingTheField) {
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
  b = base_model("org/model");
  b.dtype = "";
  EXPECT_STATUS(reg->upsert_base_model(b).status(), StatusCode::kInvalidArgument, "'org/model' has no dtype");
  b.dtype = "b f16";
  EXPECT_STATUS(reg->upsert_base_model(b).status(), StatusCode::kInvalidArgument, "dtype 'b f16'");
  b.dtype = std::string(40, 'f');
  EXPECT_STATUS(reg->upsert_base_model(b).status(), StatusCode::kInvalidArgument, "longer than");
  b = base_model("org/model");
  b.sha256 = std::string(64, 'A');
  EXPECT_STATUS(reg->upsert_base_model(b).status(), StatusCode::kInvalidArgument, "sha256");
  EXPECT_EQ(reg->get_base_model("org/model")->dtype, "f32");  // unchanged by the refusals
  EXPECT_TRUE(reg->list_adapters()->empty());
}

TEST_P(RegistryBackendsTest, NotFoundCasesNameTheThing) {
  auto reg = open_registry();
  populate(*reg);
  EXPECT_STATUS(reg->get_adapter("ghost", "llama-a").status(), StatusCode::kNotFound,
                "adapter 'ghost' not found on base model 'llama-a'");
  EXPECT_STATUS(reg->get_adapter("sql", "llama-b").status(), StatusCode::kNotFound,
                "adapter 'sql' not found on base model 'llama-b'");  // it exists, on llama-a
  EXPECT_STATUS(reg->remove_adapter("ghost", "llama-a"), StatusCode::kNotFound,
                "adapter 'ghost' not found on base model 'llama-a'");
  EXPECT_STATUS(reg->remove_adapter("sql", "llama-b"), StatusCode::kNotFound, "'llama-b'");
  EXPECT_STATUS(reg->set_adapter_state("ghost", "llama-a", AdapterState::kFailed), StatusCode::kNotFound,
                "adapter 'ghost' not found on base model 'llama-a'");
  EXPECT_STATUS(reg->set_adapter_state("sql", "llama-b", AdapterState::kRemoving), StatusCode::kNotFound,
                "adapter 'sql' not found on base model 'llama-b'");
  EXPECT_STATUS(reg->set_base_state("ghost-base", BaseModelState::kRetired), StatusCode::kNotFound,
                "base model 'ghost-base'");
  EXPECT_STATUS(reg->record_swap(swap_to("ghost-base", "llama-a")).status(), StatusCode::kNotFound,
                "base model 'ghost-base'");
  EXPECT_STATUS(reg->remove_scenario("ghost-scn", "llama-a"), StatusCode::kNotFound, "scenario 'ghost-scn'");
  EXPECT_STATUS(reg->remove_scenario("text2sql", "ghost-base"), StatusCode::kNotFound, "'ghost-base'");
  EXPECT_STATUS(reg->resolve_scenario("ghost-scn", "llama-a").status(), StatusCode::kNotFound,
                "scenario 'ghost-scn' not found on base model 'llama-a'");
  EXPECT_STATUS(reg->resolve_scenario("text2sql", "ghost-base").status(), StatusCode::kNotFound, "'ghost-base'");
}

TEST_P(RegistryBackendsTest, ScenarioWithUnknownAdapterIsRefused) {
  auto reg = open_registry();
  populate(*reg);
  const Status st = reg->set_scenario("summarise", "llama-a", "ghost").status();
  EXPECT_STATUS(st, StatusCode::kNotFound, "adapter 'ghost' not found on base model 'llama-a'");
  EXPECT_STATUS(st, StatusCode::kNotFound, "scenario 'summarise'");
  EXPECT_EQ(reg->list_scenarios()->size(), 2u);
}

TEST_P(RegistryBackendsTest, ScenarioWithAdapterOfAnotherBaseIsRefused) {
  auto reg = open_registry();
  populate(*reg);
  // There is no adapter (sql-b, llama-a); the message points at the base that has one.
  const Status st = reg->set_scenario("text2sql", "llama-a", "sql-b").status();
  EXPECT_STATUS(st, StatusCode::kNotFound, "adapter 'sql-b' not found on base model 'llama-a'");
  EXPECT_STATUS(st, StatusCode::kNotFound, "on base model 'llama-b'");
  EXPECT_EQ(reg->resolve_scenario("text2sql", "llama-a").value(), "sql");  // unchanged
}

TEST_P(RegistryBackendsTest, RemovingAnAdapterUsedByAScenarioIsRefusedNamingIt) {
  auto reg = open_registry();
  populate(*reg);
  ASSERT_TRUE(reg->set_scenario("reports", "llama-a", "sql").is_ok());
  const Status st = reg->remove_adapter("sql", "llama-a");
  EXPECT_STATUS(st, StatusCode::kFailedPrecondition, "adapter 'sql' on base model 'llama-a'");
  EXPECT_STATUS(st, StatusCode::kFailedPrecondition, "'reports'");
  EXPECT_STATUS(st, StatusCode::kFailedPrecondition, "'text2sql'");
  EXPECT_STATUS(reg->set_adapter_state("sql", "llama-a", AdapterState::kRemoving), StatusCode::kFailedPrecondition,
                "'text2sql'");
  EXPECT_EQ(reg->get_adapter("sql", "llama-a")->state, AdapterState::kReady);

  // Once no scenario points at it, it goes.
  ASSERT_TRUE(reg->set_scenario("text2sql", "llama-a", "chat").is_ok());
  ASSERT_OK(reg->remove_scenario("reports", "llama-a"));
  ASSERT_OK(reg->set_adapter_state("sql", "llama-a", AdapterState::kRemoving));
  ASSERT_OK(reg->remove_adapter("sql", "llama-a"));
  EXPECT_EQ(reg->get_adapter("sql", "llama-a").status().code(), StatusCode::kNotFound);
  EXPECT_STATUS(reg->remove_adapter("sql", "llama-a"), StatusCode::kNotFound, "'sql'");
  // The name is free again.
  EXPECT_TRUE(reg->add_adapter(adapter("sql", "llama-a")).is_ok());
}

TEST_P(RegistryBackendsTest, ScenarioNeedsAReadyAdapter) {
  auto reg = open_registry();
  populate(*reg);
  ASSERT_OK(reg->set_adapter_state("chat", "llama-a", AdapterState::kFailed));
  EXPECT_EQ(reg->get_adapter("chat", "llama-a")->state, AdapterState::kFailed);
  EXPECT_STATUS(reg->set_scenario("support", "llama-a", "chat").status(), StatusCode::kInvalidArgument,
                "failed, not ready");
  ASSERT_OK(reg->set_adapter_state("chat", "llama-a", AdapterState::kRemoving));
  EXPECT_STATUS(reg->set_scenario("support", "llama-a", "chat").status(), StatusCode::kInvalidArgument,
                "removing, not ready");
  ASSERT_OK(reg->set_adapter_state("chat", "llama-a", AdapterState::kReady));
  EXPECT_TRUE(reg->set_scenario("support", "llama-a", "chat").is_ok());
}

TEST_P(RegistryBackendsTest, SetScenarioRepointsAndKeepsCreatedAt) {
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
    ASSERT_TRUE(reg->record_swap(swap_to("llama-b", "llama-a")).is_ok());
  }
  {
    auto db = SqliteDb::open(path("registry.db"));
    ASSERT_TRUE(db.is_ok());
    ASSERT_OK((*db)->exec("UPDATE adapters SET state = 'zombie' WHERE name = 'chat';"
                          "UPDATE adapters SET target_modules = '{not json' WHERE name = 'sql';"
                          "UPDATE base_models SET state = 'asleep' WHERE name = 'llama-b';"
                          "UPDATE base_swaps SET kind = 'sideways'"));
  }
  auto reg = open_registry();
  EXPECT_STATUS(reg->get_adapter("chat", "llama-a").status(), StatusCode::kCorrupt,
                "adapter 'chat' on base model 'llama-a'");
  EXPECT_STATUS(reg->get_adapter("chat", "llama-a").status(), StatusCode::kCorrupt, "'zombie'");
  EXPECT_STATUS(reg->get_adapter("sql", "llama-a").status(), StatusCode::kCorrupt, "target_modules");
  EXPECT_STATUS(reg->list_adapters().status(), StatusCode::kCorrupt, "registry.db");
  EXPECT_STATUS(reg->list_base_models().status(), StatusCode::kCorrupt, "'asleep'");
  EXPECT_STATUS(reg->list_swaps().status(), StatusCode::kCorrupt, "'sideways'");
  EXPECT_STATUS(reg->list_swaps().status(), StatusCode::kCorrupt, "base model 'llama-b'");
  EXPECT_TRUE(reg->get_adapter("sql-b", "llama-b").is_ok());  // the healthy rows still read
}

TEST_P(RegistryBackendsTest, SwapsMoveServingPreviousAndCandidate) {
  auto reg = open_registry();
  ASSERT_TRUE(reg->upsert_base_model(base_model("v1", BaseModelState::kCandidate)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("v2", BaseModelState::kCandidate)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("v3", BaseModelState::kLoading)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("v0", BaseModelState::kRetired)).is_ok());

  // The first base: nothing served before.
  auto first = reg->record_swap(swap_to("v1", ""));
  ASSERT_TRUE(first.is_ok()) << first.status().to_string();
  EXPECT_EQ(base_states(*reg), "v0=retired v1=serving v2=candidate v3=loading");
  // v1 -> v2.
  ASSERT_TRUE(reg->record_swap(swap_to("v2", "v1")).is_ok());
  EXPECT_EQ(base_states(*reg), "v0=retired v1=previous v2=serving v3=loading");
  // Roll back to v1.
  SwapRecord rollback = swap_to("v1", "v2", kSwapKindRollback);
  rollback.actor = "oncall@example.com";
  rollback.note = "p99 latency doubled";
  ASSERT_TRUE(reg->record_swap(rollback).is_ok());
  EXPECT_EQ(base_states(*reg), "v0=retired v1=serving v2=previous v3=loading");
  // v3 finishes loading and is promoted, forced: the old previous (v2) steps back to candidate.
  ASSERT_OK(reg->set_base_state("v3", BaseModelState::kCandidate));
  SwapRecord forced = swap_to("v3", "v1");
  forced.forced = true;
  forced.note = "missing adapters: chat, summarise";
  auto last = reg->record_swap(forced);
  ASSERT_TRUE(last.is_ok()) << last.status().to_string();
  EXPECT_EQ(base_states(*reg), "v0=retired v1=previous v2=candidate v3=serving");
  EXPECT_GT(last->id, first->id);
  EXPECT_GT(last->at, 1000000000);
  EXPECT_TRUE(last->forced);
  EXPECT_EQ(last->note, "missing adapters: chat, summarise");

  auto swaps = reg->list_swaps();
  ASSERT_TRUE(swaps.is_ok()) << swaps.status().to_string();
  ASSERT_EQ(swaps->size(), 4u);
  std::vector<std::string> history;  // newest first
  for (const SwapRecord& s : *swaps) history.push_back(s.kind + ":" + s.from_base + "->" + s.to_base);
  EXPECT_EQ(history, (std::vector<std::string>{"promote:v1->v3", "rollback:v2->v1", "promote:v1->v2",
                                               "promote:->v1"}));
  EXPECT_EQ((*swaps)[0].id, last->id);
  EXPECT_EQ((*swaps)[0].at, last->at);
  EXPECT_TRUE((*swaps)[0].forced);
  EXPECT_EQ((*swaps)[0].note, "missing adapters: chat, summarise");
  EXPECT_EQ((*swaps)[1].actor, "oncall@example.com");
  EXPECT_EQ((*swaps)[1].note, "p99 latency doubled");
  EXPECT_FALSE((*swaps)[1].forced);
  EXPECT_EQ((*swaps)[3].actor, "admin");
  EXPECT_EQ((*swaps)[3].from_base, "");
  for (size_t i = 1; i < swaps->size(); ++i) {
    EXPECT_LT((*swaps)[i].id, (*swaps)[i - 1].id);
    EXPECT_LE((*swaps)[i].at, (*swaps)[i - 1].at);
  }
  auto two = reg->list_swaps(2);
  ASSERT_TRUE(two.is_ok());
  ASSERT_EQ(two->size(), 2u);
  EXPECT_EQ((*two)[0].to_base, "v3");
  EXPECT_EQ((*two)[1].to_base, "v1");
  EXPECT_STATUS(reg->list_swaps(0).status(), StatusCode::kInvalidArgument, "limit 0");
}

TEST_P(RegistryBackendsTest, SwapLeavesExactlyOneServingBase) {
  auto reg = open_registry();
  // upsert_base_model writes states as given: here two bases claim to serve.
  ASSERT_TRUE(reg->upsert_base_model(base_model("a")).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("b")).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("c", BaseModelState::kPrevious)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("d", BaseModelState::kCandidate)).is_ok());
  ASSERT_TRUE(reg->record_swap(swap_to("d", "a")).is_ok());
  EXPECT_EQ(base_states(*reg), "a=previous b=previous c=candidate d=serving");
  ASSERT_TRUE(reg->record_swap(swap_to("a", "d", kSwapKindRollback)).is_ok());
  EXPECT_EQ(base_states(*reg), "a=serving b=candidate c=candidate d=previous");
  // Swapping to the base already serving keeps it serving and is recorded.
  ASSERT_TRUE(reg->record_swap(swap_to("a", "a")).is_ok());
  EXPECT_EQ(base_states(*reg), "a=serving b=candidate c=candidate d=candidate");
  EXPECT_EQ(reg->list_swaps()->size(), 3u);
}

TEST_P(RegistryBackendsTest, SwapIsRefusedForUnservableBasesAndMalformedRecords) {
  auto reg = open_registry();
  ASSERT_TRUE(reg->upsert_base_model(base_model("live")).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("loading", BaseModelState::kLoading)).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("old", BaseModelState::kRetired)).is_ok());
  BaseModelRecord broken = base_model("broken", BaseModelState::kFailed);
  broken.error = "sha256 mismatch";
  ASSERT_TRUE(reg->upsert_base_model(broken).is_ok());
  for (const char* name : {"loading", "old", "broken"}) {
    const Status st = reg->record_swap(swap_to(name, "live")).status();
    EXPECT_EQ(st.code(), StatusCode::kInvalidArgument) << st.to_string();
    EXPECT_NE(st.message().find(std::string("base model '") + name + "'"), std::string::npos) << st.to_string();
  }
  EXPECT_STATUS(reg->record_swap(swap_to("old", "live")).status(), StatusCode::kInvalidArgument, "retired");
  EXPECT_STATUS(reg->record_swap(swap_to("broken", "live")).status(), StatusCode::kInvalidArgument, "failed");
  SwapRecord bad = swap_to("loading", "live");
  bad.kind = "sideways";
  EXPECT_STATUS(reg->record_swap(bad).status(), StatusCode::kInvalidArgument, "kind 'sideways'");
  bad = swap_to("loading", "live");
  bad.actor = "";
  EXPECT_STATUS(reg->record_swap(bad).status(), StatusCode::kInvalidArgument, "no actor");
  bad.actor = std::string(300, 'x');
  EXPECT_STATUS(reg->record_swap(bad).status(), StatusCode::kInvalidArgument, "longer than");
  bad = swap_to("", "live");
  EXPECT_STATUS(reg->record_swap(bad).status(), StatusCode::kInvalidArgument, "base model name is empty");
  bad = swap_to("loading", "li ve");
  EXPECT_STATUS(reg->record_swap(bad).status(), StatusCode::kInvalidArgument, "'li ve'");
  // Nothing changed and nothing was recorded.
  EXPECT_EQ(base_states(*reg), "broken=failed live=serving loading=loading old=retired");
  EXPECT_EQ(reg->get_base_model("broken")->error, "sha256 mismatch");
  EXPECT_TRUE(reg->list_swaps()->empty());
}

TEST_P(RegistryBackendsTest, SetBaseStateRefusesServingAndKeepsErrorOnlyForFailed) {
  auto reg = open_registry();
  ASSERT_TRUE(reg->upsert_base_model(base_model("v1")).is_ok());
  ASSERT_TRUE(reg->upsert_base_model(base_model("v2", BaseModelState::kLoading)).is_ok());
  const Status st = reg->set_base_state("v2", BaseModelState::kServing);
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "base model 'v2'");
  EXPECT_STATUS(st, StatusCode::kInvalidArgument, "record_swap");
  EXPECT_EQ(reg->get_base_model("v2")->state, BaseModelState::kLoading);

  const int64_t before = reg->get_base_model("v2")->updated_at;
  ASSERT_OK(reg->set_base_state("v2", BaseModelState::kFailed, "model.safetensors: truncated"));
  auto failed = reg->get_base_model("v2");
  ASSERT_TRUE(failed.is_ok());
  EXPECT_EQ(failed->state, BaseModelState::kFailed);
  EXPECT_EQ(failed->error, "model.safetensors: truncated");
  EXPECT_GE(failed->updated_at, before);
  ASSERT_OK(reg->set_base_state("v2", BaseModelState::kCandidate, "dropped: not failed"));
  EXPECT_EQ(reg->get_base_model("v2")->state, BaseModelState::kCandidate);
  EXPECT_EQ(reg->get_base_model("v2")->error, "");
  ASSERT_OK(reg->set_base_state("v2", BaseModelState::kRetired));
  EXPECT_EQ(base_states(*reg), "v1=serving v2=retired");
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

INSTANTIATE_TEST_SUITE_P(Backends, RegistryBackendsTest, testing::kBothBackends, testing::backend_name);

}  // namespace
}  // namespace loragate
