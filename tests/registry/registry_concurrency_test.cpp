// Registry under concurrency and crashes, on real files:
//   - 8 threads sharing one Registry, and 4 threads each with their own
//     connection to the same file, adding, repointing, removing and listing:
//     no lost rows, no duplicates, contested names won exactly once;
//   - threads swapping between bases while others add adapters to them:
//     exactly one serving base and a complete swap history at the end;
//   - a child process that commits, then dies inside an open transaction
//     whose pages already reached the WAL: reopening shows exactly the
//     committed rows;
//   - a child killed with SIGKILL while committing in a loop: every commit it
//     reported survives.
#include "registry/registry.h"

#include <gtest/gtest.h>
#include <signal.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "registry/sqlite_db.h"
#include "tests/registry/pg_server.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate {
namespace {

using testing::adapter;
using testing::base_model;
using testing::numbered;

constexpr int kRounds = 20;

std::string own_name(int thread, int round) { return numbered("t", thread) + numbered("-a", round); }
std::string scenario_name(int thread) { return numbered("s", thread); }

// One thread's work; `reg` may be shared or private. Returns "" or what went wrong.
std::string churn(Registry& reg, int thread, std::atomic<int>* shared_wins) {
  for (int round = 0; round < kRounds; ++round) {
    const std::string mine = own_name(thread, round);
    if (!reg.add_adapter(adapter(mine, "base")).is_ok()) return "add " + mine;
    auto scn = reg.set_scenario(scenario_name(thread), "base", mine);
    if (!scn.is_ok()) return "set_scenario: " + scn.status().to_string();
    // The one just pointed at is in use; the previous one is free.
    if (reg.remove_adapter(mine, "base").code() != StatusCode::kFailedPrecondition) return "removed in-use " + mine;
    if (round > 0) {
      const Status st = reg.remove_adapter(own_name(thread, round - 1), "base");
      if (!st.is_ok()) return "remove previous: " + st.to_string();
    }
    // Every thread races for the same name; exactly one may win.
    auto contested = reg.add_adapter(adapter(numbered("shared-", round), "base"));
    if (contested.is_ok()) {
      shared_wins->fetch_add(1);
    } else if (contested.status().code() != StatusCode::kAlreadyExists) {
      return "contested add: " + contested.status().to_string();
    }
    auto list = reg.list_adapters("base");
    if (!list.is_ok()) return "list: " + list.status().to_string();
    std::set<std::string> names;
    bool found_mine = false;
    for (const AdapterRecord& a : *list) {
      if (!names.insert(a.name).second) return "duplicate row " + a.name;
      found_mine = found_mine || a.name == mine;
    }
    if (!std::is_sorted(list->begin(), list->end(),
                        [](const AdapterRecord& x, const AdapterRecord& y) { return x.name < y.name; })) {
      return "list not sorted";
    }
    if (!found_mine) return "own adapter " + mine + " missing from the list";
    auto resolved = reg.resolve_scenario(scenario_name(thread), "base");
    if (!resolved.is_ok() || *resolved != mine) return "resolve " + scenario_name(thread);
  }
  return "";
}

class RegistryConcurrencyTest : public testing::RegistryLocationTest {
 protected:
  // Each thread's last adapter, every shared-N won once, each thread's scenario.
  void expect_final_state(Registry& reg, int threads) {
    auto adapters = reg.list_adapters();
    ASSERT_TRUE(adapters.is_ok()) << adapters.status().to_string();
    std::set<std::string> expected;
    for (int t = 0; t < threads; ++t) expected.insert(own_name(t, kRounds - 1));
    for (int r = 0; r < kRounds; ++r) expected.insert(numbered("shared-", r));
    std::vector<std::string> got;
    for (const AdapterRecord& a : *adapters) got.push_back(a.name);
    EXPECT_EQ(got, std::vector<std::string>(expected.begin(), expected.end()));
    auto scenarios = reg.list_scenarios();
    ASSERT_TRUE(scenarios.is_ok());
    ASSERT_EQ(scenarios->size(), static_cast<size_t>(threads));
    for (const ScenarioRecord& s : *scenarios) {
      const int t = std::stoi(s.name.substr(1));
      EXPECT_EQ(s.adapter, own_name(t, kRounds - 1));
    }
  }
};

// The races that hold on either backend: SQLite's file locks, or
// PostgreSQL's transactions under the registry's advisory lock.
class RegistryBackendsConcurrencyTest : public testing::OnBothBackends<RegistryConcurrencyTest> {};

TEST_P(RegistryBackendsConcurrencyTest, EightThreadsShareOneRegistry) {
  constexpr int kThreads = 8;
  auto opened = Registry::open(location("shared.db"));
  ASSERT_TRUE(opened.is_ok()) << opened.status().to_string();
  Registry& reg = **opened;
  ASSERT_TRUE(reg.upsert_base_model(base_model("base")).is_ok());
  std::atomic<int> shared_wins{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] { errors[t] = churn(reg, t, &shared_wins); });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(shared_wins.load(), kRounds);
  expect_final_state(reg, kThreads);
  opened->reset();
  auto reopened = Registry::open(location("shared.db"));
  ASSERT_TRUE(reopened.is_ok());
  expect_final_state(**reopened, kThreads);
}

TEST_P(RegistryBackendsConcurrencyTest, ThreadsWithTheirOwnConnectionsToOneFile) {
  constexpr int kThreads = 4;
  const std::string where = location("multi.db");
  {
    auto reg = Registry::open(where);
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    ASSERT_TRUE((*reg)->upsert_base_model(base_model("base")).is_ok());
  }
  std::atomic<int> shared_wins{0};
  std::vector<std::string> errors(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      auto reg = Registry::open(where);  // also races the (no-op) migration
      errors[t] = reg.is_ok() ? churn(**reg, t, &shared_wins) : "open: " + reg.status().to_string();
    });
  }
  for (auto& th : threads) th.join();
  for (int t = 0; t < kThreads; ++t) EXPECT_EQ(errors[t], "") << "thread " << t;
  EXPECT_EQ(shared_wins.load(), kRounds);
  auto reg = Registry::open(where);
  ASSERT_TRUE(reg.is_ok());
  expect_final_state(**reg, kThreads);
}

// Two threads swap among three bases while two others add adapters named
// alike on every base; each on its own connection to one file.
TEST_P(RegistryBackendsConcurrencyTest, ConcurrentSwapsLeaveOneServingBase) {
  const std::vector<std::string> bases = {"v1", "v2", "v3"};
  const std::string where = location("swaps.db");
  {
    auto reg = Registry::open(where);
    ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
    for (const std::string& b : bases) {
      ASSERT_TRUE((*reg)->upsert_base_model(base_model(b, BaseModelState::kCandidate)).is_ok());
    }
  }
  constexpr int kSwappers = 2;
  constexpr int kAdders = 2;
  std::vector<std::string> errors(kSwappers + kAdders);
  std::vector<std::thread> threads;
  for (int t = 0; t < kSwappers + kAdders; ++t) {
    threads.emplace_back([&, t] {
      auto reg = Registry::open(where);
      if (!reg.is_ok()) {
        errors[t] = "open: " + reg.status().to_string();
        return;
      }
      for (int round = 0; round < kRounds; ++round) {
        if (t < kSwappers) {
          const std::string& to = bases[static_cast<size_t>(round + t) % bases.size()];
          SwapRecord s = testing::swap_to(to, "", round % 2 ? kSwapKindRollback : kSwapKindPromote);
          s.actor = numbered("swapper-", t);
          auto stored = (*reg)->record_swap(s);
          if (!stored.is_ok()) {
            errors[t] = "swap: " + stored.status().to_string();
            return;
          }
        } else {
          for (const std::string& b : bases) {
            const std::string name = numbered("a", round) + numbered("-", t);
            auto added = (*reg)->add_adapter(adapter(name, b));
            if (!added.is_ok()) {
              errors[t] = "add: " + added.status().to_string();
              return;
            }
          }
        }
      }
    });
  }
  for (auto& th : threads) th.join();
  for (size_t t = 0; t < errors.size(); ++t) EXPECT_EQ(errors[t], "") << "thread " << t;

  auto reg = Registry::open(where);
  ASSERT_TRUE(reg.is_ok());
  auto listed = (*reg)->list_base_models();
  ASSERT_TRUE(listed.is_ok());
  int serving = 0, previous = 0;
  for (const BaseModelRecord& b : *listed) {
    serving += b.state == BaseModelState::kServing;
    previous += b.state == BaseModelState::kPrevious;
  }
  EXPECT_EQ(serving, 1);
  EXPECT_LE(previous, 1);
  auto swaps = (*reg)->list_swaps(1000);
  ASSERT_TRUE(swaps.is_ok());
  ASSERT_EQ(swaps->size(), static_cast<size_t>(kSwappers * kRounds));
  for (size_t i = 1; i < swaps->size(); ++i) EXPECT_LT((*swaps)[i].id, (*swaps)[i - 1].id);
  // The newest swap names the base that serves now.
  EXPECT_EQ((*reg)->get_base_model(swaps->front().to_base)->state, BaseModelState::kServing);
  for (const std::string& b : bases) {
    EXPECT_EQ((*reg)->list_adapters(b)->size(), static_cast<size_t>(kAdders * kRounds)) << b;
  }
}

int64_t file_size(const std::string& file) {
  struct stat st {};
  return ::stat(file.c_str(), &st) == 0 ? static_cast<int64_t>(st.st_size) : -1;
}

// The child's side of the crash test; returns its exit code (0 = reached the crash point).
int commit_then_die_mid_transaction(const std::string& db_path) {
  auto reg = Registry::open(db_path);
  if (!reg.is_ok()) return 10;
  if (!(*reg)->upsert_base_model(base_model("base")).is_ok()) return 11;
  for (int i = 0; i < 5; ++i) {
    if (!(*reg)->add_adapter(adapter(numbered("committed-", i), "base")).is_ok()) return 12;
  }
  if (!(*reg)->set_scenario("scn", "base", "committed-0").is_ok()) return 13;
  const int64_t wal_after_commits = file_size(db_path + "-wal");

  // A second connection opens a transaction big enough that SQLite spills
  // its uncommitted pages into the WAL, changes committed rows too, and the
  // process dies before COMMIT.
  auto raw = SqliteDb::open(db_path);
  if (!raw.is_ok()) return 14;
  SqliteDb& db = **raw;
  if (!db.exec("PRAGMA cache_size = 20").is_ok()) return 15;
  auto txn = Transaction::begin(db);
  if (!txn.is_ok()) return 16;
  auto insert = db.prepare(
      "INSERT INTO adapters VALUES (?1, 'base', ?2, 8, 16.0, '[]', '', 0, 'ready', 1, 1)");
  if (!insert.is_ok()) return 17;
  for (int i = 0; i < 3000; ++i) {
    insert->reset();
    insert->bind(1, numbered("uncommitted-", i)).bind(2, "/adapters/" + std::string(400, 'p'));
    if (!insert->run().is_ok()) return 18;
  }
  if (!db.exec("UPDATE adapters SET state = 'failed' WHERE name = 'committed-1'").is_ok()) return 19;
  if (!db.exec("DELETE FROM scenarios").is_ok()) return 20;
  if (file_size(db_path + "-wal") <= wal_after_commits) return 21;  // nothing spilled: a weaker test
  ::_exit(0);  // no COMMIT, no ROLLBACK, no destructors
}

TEST_F(RegistryConcurrencyTest, DeathInsideATransactionKeepsExactlyTheCommittedRows) {
  const std::string db_path = path("crash.db");
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) ::_exit(commit_then_die_mid_transaction(db_path));
  int wstatus = 0;
  ASSERT_EQ(::waitpid(child, &wstatus, 0), child);
  ASSERT_TRUE(WIFEXITED(wstatus));
  ASSERT_EQ(WEXITSTATUS(wstatus), 0) << "the child failed before its crash point (see its exit code)";

  auto reg = Registry::open(db_path);
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  auto adapters = (*reg)->list_adapters();
  ASSERT_TRUE(adapters.is_ok()) << adapters.status().to_string();
  std::vector<std::string> names;
  for (const AdapterRecord& a : *adapters) {
    names.push_back(a.name);
    EXPECT_EQ(a.state, AdapterState::kReady) << a.name;
  }
  EXPECT_EQ(names, (std::vector<std::string>{"committed-0", "committed-1", "committed-2", "committed-3",
                                             "committed-4"}));
  EXPECT_EQ((*reg)->resolve_scenario("scn", "base").value(), "committed-0");
  // And the file is healthy enough to take new writes.
  EXPECT_TRUE((*reg)->add_adapter(adapter("after-crash", "base")).is_ok());
  auto raw = SqliteDb::open(db_path);
  ASSERT_TRUE(raw.is_ok());
  auto check = (*raw)->prepare("PRAGMA integrity_check");
  ASSERT_TRUE(check.is_ok());
  ASSERT_TRUE(check->step().value());
  EXPECT_EQ(check->column_text(0), "ok");
}

TEST_F(RegistryConcurrencyTest, KillDuringCommitsKeepsEveryReportedCommit) {
  const std::string db_path = path("kill.db");
  {
    auto reg = Registry::open(db_path);
    ASSERT_TRUE(reg.is_ok());
    ASSERT_TRUE((*reg)->upsert_base_model(base_model("base")).is_ok());
  }
  int fds[2];
  ASSERT_EQ(::pipe(fds), 0);
  const pid_t child = ::fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    ::close(fds[0]);
    auto reg = Registry::open(db_path);
    if (!reg.is_ok()) ::_exit(10);
    for (int i = 0;; ++i) {  // commits until killed, reporting each one
      if (!(*reg)->add_adapter(adapter(numbered("k", i), "base")).is_ok()) ::_exit(11);
      if (::write(fds[1], &i, sizeof(i)) != sizeof(i)) ::_exit(12);
    }
  }
  ::close(fds[1]);
  int last = -1;
  for (int got = 0; got < 30;) {  // let it commit a while
    int i = 0;
    if (::read(fds[0], &i, sizeof(i)) != sizeof(i)) break;
    last = i;
    ++got;
  }
  ::kill(child, SIGKILL);
  int wstatus = 0;
  ::waitpid(child, &wstatus, 0);
  // Drain what it reported before dying.
  for (int i = 0; ::read(fds[0], &i, sizeof(i)) == sizeof(i);) last = i;
  ::close(fds[0]);
  ASSERT_TRUE(WIFSIGNALED(wstatus)) << "the child exited on its own with " << WEXITSTATUS(wstatus);
  ASSERT_GE(last, 29);

  auto reg = Registry::open(db_path);
  ASSERT_TRUE(reg.is_ok()) << reg.status().to_string();
  auto adapters = (*reg)->list_adapters();
  ASSERT_TRUE(adapters.is_ok());
  // Every reported commit is there; at most one more (committed, not yet reported).
  const int64_t n = static_cast<int64_t>(adapters->size());
  EXPECT_GE(n, last + 1);
  EXPECT_LE(n, last + 2);
  std::set<std::string> names;
  for (const AdapterRecord& a : *adapters) names.insert(a.name);
  for (int i = 0; i < n; ++i) EXPECT_TRUE(names.count(numbered("k", i))) << "k" << i;
}

// A watcher on its own connection wakes within a second of another
// registry's write while two more keep writing: notifications (PostgreSQL)
// or data_version (SQLite) cross connections.
TEST_P(RegistryBackendsConcurrencyTest, WaitForChangeWakesOnAnotherRegistrysWriteWithinASecond) {
  const std::string where = location("wake.db");
  auto watcher = Registry::open(where);
  auto writer = Registry::open(where);
  ASSERT_TRUE(watcher.is_ok()) << watcher.status().to_string();
  ASSERT_TRUE(writer.is_ok()) << writer.status().to_string();
  ASSERT_TRUE((*writer)->upsert_base_model(base_model("base")).is_ok());
  for (int i = 0; i < 3; ++i) ASSERT_TRUE((*watcher)->wait_for_change(0).is_ok());  // settle
  for (int round = 0; round < 3; ++round) {
    std::atomic<bool> written{false};
    std::chrono::steady_clock::time_point wrote_at;
    std::thread write([&] {
      std::this_thread::sleep_for(std::chrono::milliseconds(150));
      wrote_at = std::chrono::steady_clock::now();
      written = (*writer)->add_adapter(adapter(numbered("wake-", round), "base")).is_ok();
    });
    auto woke = (*watcher)->wait_for_change(5000);
    const auto woke_at = std::chrono::steady_clock::now();
    write.join();
    ASSERT_TRUE(written.load());
    ASSERT_TRUE(woke.is_ok()) << woke.status().to_string();
    EXPECT_TRUE(*woke) << "round " << round;
    EXPECT_LT(woke_at - wrote_at, std::chrono::seconds(1)) << "round " << round;
    auto quiet = (*watcher)->wait_for_change(0);  // drain what the write left
    ASSERT_TRUE(quiet.is_ok());
  }
  // Heartbeats alone do not wake it.
  ReplicaRecord beat;
  beat.url = "http://127.0.0.1:9000";
  beat.bases = "[]";
  beat.adapters = "[]";
  (void)(*watcher)->wait_for_change(0);
  ASSERT_TRUE((*writer)->upsert_replica(beat).is_ok());
  if (backend() == testing::Backend::kPostgres) {  // SQLite sees any commit of another connection
    auto after_beat = (*watcher)->wait_for_change(300);
    ASSERT_TRUE(after_beat.is_ok());
    EXPECT_FALSE(*after_beat);
  }
}

INSTANTIATE_TEST_SUITE_P(Backends, RegistryBackendsConcurrencyTest, testing::kBothBackends, testing::backend_name);

}  // namespace
}  // namespace loragate
