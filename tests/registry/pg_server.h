// A real PostgreSQL server for the registry tests, and the fixture that runs
// a test on both registry backends.
//
// The server is Debian's postgresql package run from a temporary directory:
// started on first use in a test binary (initdb once per machine into a
// template that later processes copy, then pg_ctl start listening only on a
// unix socket there), stopped (pg_ctl stop -m immediate) and removed by a
// GoogleTest environment when the binary ends. As root, PostgreSQL's
// binaries run as the `postgres` user (runuser), which owns the directory.
// Every test gets fresh databases (CREATE DATABASE lg_test_<n>).
//
// Without the binaries (or LORAGATE_PG_BIN) the PostgreSQL variants skip
// with a message; under CI=true they fail, as a missing fixture does.
//
// Thread-safety: PgTestServer::instance() and new_database() lock; the
// fixtures are used by their test's thread.
#pragma once

#include <gtest/gtest.h>

#include <map>
#include <mutex>
#include <string>

#include "common/status.h"
#include "tests/registry/registry_fixtures.h"

namespace loragate::testing {

class PgTestServer {
 public:
  // The running server, started on the first call; null when it cannot run,
  // with the reason in *why.
  static PgTestServer* instance(std::string* why);
  // Stops the server and removes its directory (the environment's teardown).
  static void shut_down();

  // The URL of a new empty database on the server.
  Result<std::string> new_database();
  // The URL of database `name` (for tests that connect to a given one).
  std::string url_of(const std::string& name) const;

 private:
  PgTestServer() = default;
  Status start(std::string* log);
  void stop();

  std::mutex mu_;
  std::string bin_, dir_, data_;
  int port_ = 0;
  bool as_postgres_user_ = false;
  int next_db_ = 0;  // guarded by mu_
};

enum class Backend { kSqlite, kPostgres };
inline const auto kBothBackends = ::testing::Values(Backend::kSqlite, Backend::kPostgres);
inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) {
  return info.param == Backend::kSqlite ? "sqlite" : "postgres";
}

// A temp directory and registry locations on one backend (SQLite unless
// use_backend says otherwise): location("a.db") is the same registry every
// time a test asks for "a.db" — a file in the temp directory, or a database
// of its own on the test server.
class RegistryLocationTest : public TempDirTest {
 protected:
  // Switches to `backend`; for PostgreSQL skips (fails under CI=true) the
  // test when there is no server.
  void use_backend(Backend backend);
  std::string location(const std::string& name);
  Backend backend() const { return backend_; }

 private:
  Backend backend_ = Backend::kSqlite;
  std::map<std::string, std::string> databases_;
};

// Fixture `Base` (a RegistryLocationTest) run once per backend: TEST_P with
// INSTANTIATE_TEST_SUITE_P(Backends, X, kBothBackends, backend_name).
template <class Base>
class OnBothBackends : public Base, public ::testing::WithParamInterface<Backend> {
 protected:
  // The backend first: Base::SetUp may open a registry already.
  void SetUp() override {
    this->use_backend(this->GetParam());
    if (this->IsSkipped() || this->HasFatalFailure()) return;
    Base::SetUp();
  }
};

}  // namespace loragate::testing
