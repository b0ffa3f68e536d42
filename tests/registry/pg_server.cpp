#include "tests/registry/pg_server.h"

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "registry/pg_connection.h"
#include "tests/test_util.h"

namespace loragate::testing {
namespace {

namespace fs = std::filesystem;

std::mutex g_pg_mu;
PgTestServer* g_pg_server = nullptr;  // guarded by g_pg_mu
std::string g_pg_failure;             // why it could not start; guarded by g_pg_mu
bool g_pg_tried = false;              // guarded by g_pg_mu

// The directory holding initdb and pg_ctl: LORAGATE_PG_BIN, else the newest
// /usr/lib/postgresql/<version>/bin.
std::string find_pg_bin() {
  if (const char* env = std::getenv("LORAGATE_PG_BIN"); env != nullptr && *env) return env;
  std::string best;
  int best_version = -1;
  std::error_code ec;
  for (const auto& entry : fs::directory_iterator("/usr/lib/postgresql", ec)) {
    const std::string name = entry.path().filename().string();
    const int version = std::atoi(name.c_str());
    if (version > best_version && fs::exists(entry.path() / "bin" / "pg_ctl")) {
      best_version = version;
      best = (entry.path() / "bin").string();
    }
  }
  return best;
}

// A TCP port nobody listens on now: it only names the unix socket, but two
// servers in one socket directory would clash, and the URL needs it anyway.
int free_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd < 0) return 0;
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

std::string read_file_tail(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  const std::string all = s.str();
  return all.size() > 2000 ? all.substr(all.size() - 2000) : all;
}

class PgServerEnvironment : public ::testing::Environment {
 public:
  void TearDown() override { PgTestServer::shut_down(); }
};

[[maybe_unused]] ::testing::Environment* const g_pg_environment =
    ::testing::AddGlobalTestEnvironment(new PgServerEnvironment);

}  // namespace

PgTestServer* PgTestServer::instance(std::string* why) {
  std::lock_guard lock(g_pg_mu);
  if (!g_pg_tried) {
    g_pg_tried = true;
    auto* server = new PgTestServer;
    std::string log;
    const Status started = server->start(&log);
    if (started.is_ok()) {
      g_pg_server = server;
    } else {
      g_pg_failure = started.to_string() + (log.empty() ? "" : "\n" + log);
      server->stop();
      delete server;
    }
  }
  if (g_pg_server == nullptr && why != nullptr) *why = g_pg_failure;
  return g_pg_server;
}

void PgTestServer::shut_down() {
  std::lock_guard lock(g_pg_mu);
  if (g_pg_server != nullptr) g_pg_server->stop();
  delete g_pg_server;
  g_pg_server = nullptr;
}

Status PgTestServer::start(std::string* log) {
  bin_ = find_pg_bin();
  if (bin_.empty() || !fs::exists(fs::path(bin_) / "initdb")) {
    return Status::not_found("PostgreSQL's initdb and pg_ctl were not found (install Debian's postgresql, or set "
                             "LORAGATE_PG_BIN to their directory)");
  }
  as_postgres_user_ = ::geteuid() == 0;  // PostgreSQL refuses to run as root
  const std::string run_as = as_postgres_user_ ? "runuser -u postgres -- " : "";
  auto run = [&](const std::string& command, const std::string& log_file) -> Status {
    const std::string full = run_as + command + " >" + log_file + " 2>&1";
    if (std::system(full.c_str()) == 0) return Status::ok();
    *log = read_file_tail(log_file);
    return Status::internal("failed: " + full);
  };
  auto chown_to_postgres = [&](const std::string& path) -> Status {
    if (!as_postgres_user_) return Status::ok();
    const std::string command = "chown -R postgres:postgres " + path;
    return std::system(command.c_str()) == 0 ? Status::ok() : Status::internal("failed: " + command);
  };

  // initdb once per machine and user: later test processes copy the template.
  const std::string version = fs::path(bin_).parent_path().filename().string();
  const fs::path tmp = fs::temp_directory_path();
  const fs::path templ = tmp / ("lg-pg-template-" + version + "-" + std::to_string(::geteuid()));
  if (!fs::exists(templ / "PG_VERSION")) {
    const std::string fresh = make_temp_dir("lg-pg-initdb");
    if (fresh.empty()) return Status::io_error("cannot make a temporary directory");
    LG_RETURN_IF_ERROR(chown_to_postgres(fresh));
    const Status made = run(bin_ + "/initdb -D " + fresh + "/data -A trust -U postgres -E UTF8 --locale=C --no-sync",
                            fresh + "/initdb.log");
    if (!made.is_ok()) {
      fs::remove_all(fresh);
      return made;
    }
    std::error_code ec;
    fs::rename(fs::path(fresh) / "data", templ, ec);  // atomic; another process may have won
    fs::remove_all(fresh, ec);
    if (!fs::exists(templ / "PG_VERSION")) return Status::io_error("cannot make the template " + templ.string());
  }

  dir_ = make_temp_dir("lg-pg");
  if (dir_.empty()) return Status::io_error("cannot make a temporary directory");
  data_ = dir_ + "/data";
  const std::string copy = "cp -a " + templ.string() + " " + data_;
  if (std::system(copy.c_str()) != 0) return Status::io_error("failed: " + copy);
  LG_RETURN_IF_ERROR(chown_to_postgres(dir_));
  port_ = free_port();
  if (port_ == 0) return Status::io_error("no free port");
  // fsync off: a test server's data may die with it.
  return run(bin_ + "/pg_ctl -D " + data_ + " -l " + dir_ + "/server.log -w -t 30 -o \"-k " + dir_ + " -p " +
                 std::to_string(port_) + " -c listen_addresses='' -c fsync=off -c max_connections=200\" start",
             dir_ + "/pg_ctl.log");
}

void PgTestServer::stop() {
  if (dir_.empty()) return;
  if (!data_.empty() && fs::exists(data_ + "/postmaster.pid")) {
    const std::string command = std::string(as_postgres_user_ ? "runuser -u postgres -- " : "") + bin_ +
                                "/pg_ctl -D " + data_ + " -m immediate stop >/dev/null 2>&1";
    (void)std::system(command.c_str());
  }
  std::error_code ec;
  fs::remove_all(dir_, ec);
  dir_.clear();
}

std::string PgTestServer::url_of(const std::string& name) const {
  return "postgresql:///" + name + "?host=" + dir_ + "&port=" + std::to_string(port_) + "&user=postgres";
}

Result<std::string> PgTestServer::new_database() {
  std::string name;
  {
    std::lock_guard lock(mu_);
    name = "lg_test_" + std::to_string(next_db_++);
  }
  LG_ASSIGN_OR_RETURN(std::unique_ptr<PgConnection> admin, PgConnection::open(url_of("postgres")));
  LG_RETURN_IF_ERROR(admin->exec("CREATE DATABASE " + name));
  return url_of(name);
}

void RegistryLocationTest::use_backend(Backend backend) {
  backend_ = backend;
  if (backend != Backend::kPostgres) return;
  std::string why;
  if (PgTestServer::instance(&why) == nullptr) {
    const std::string message = "no PostgreSQL test server: " + why;
    if (in_ci()) {
      GTEST_FAIL() << message << " (CI=true: the PostgreSQL variants must run)";
    } else {
      GTEST_SKIP() << message << " (skipped; with CI=true this fails)";
    }
  }
}

std::string RegistryLocationTest::location(const std::string& name) {
  if (backend_ == Backend::kSqlite) return path(name);
  auto found = databases_.find(name);
  if (found != databases_.end()) return found->second;
  PgTestServer* server = PgTestServer::instance(nullptr);
  if (server == nullptr) return "postgresql:///no-test-server";
  auto url = server->new_database();
  EXPECT_TRUE(url.is_ok()) << url.status().to_string();
  const std::string got = url.is_ok() ? *url : "postgresql:///no-database";
  databases_[name] = got;
  return got;
}

}  // namespace loragate::testing
