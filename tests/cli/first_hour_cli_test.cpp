// The frictions a newcomer met in the README's first hour (issue 37), each as
// the command a user runs: --version; train refusing to overwrite a finished
// adapter; the admin CLI waiting for a server that is still starting and
// naming the server-side fix for a 403; a server with --model and no registry
// keeping its own and saying where in the banner; a quantised folder served as
// its own dtype.
#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <gtest/gtest.h>

#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <thread>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

// A loopback port nothing listens on (bound, then released).
int unused_port() {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ::bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a));
  socklen_t len = sizeof(a);
  ::getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len);
  ::close(fd);
  return ntohs(a.sin_port);
}

std::string read_file(const std::string& path) {
  std::ifstream in(path);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

class FirstHourCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("lg-first-hour");
    CliRun m = run_cli("synth-model --out " + dir_ + "/m --preset tiny --seed 5");
    ASSERT_EQ(m.exit_code, 0) << m.out;
  }
  void TearDown() override {
    for (const std::string& pid : servers_) testing::run_command("kill " + pid + " 2>/dev/null; sleep 0.2");
    std::filesystem::remove_all(dir_);
  }

  // `loragate serve ARGS` started in dir_ (its working folder) after `delay_s`,
  // without an admin token; its output goes to `log`.
  void start_server(const std::string& args, const std::string& log, double delay_s = 0) {
    const std::string cmd = "cd " + dir_ + " && (sleep " + std::to_string(delay_s) +
                            "; exec env -u LORAGATE_ADMIN_TOKEN " + LORAGATE_BIN + " serve " + args + ") > " + log +
                            " 2>&1 & echo $!";
    auto [rc, pid] = testing::run_command(cmd);
    ASSERT_EQ(rc, 0);
    while (!pid.empty() && pid.back() == '\n') pid.pop_back();
    servers_.push_back(pid);
  }
  // Waits (up to a minute) for `text` in the file `log`; returns its contents.
  static std::string wait_for(const std::string& log, const std::string& text) {
    std::string seen;
    for (int i = 0; i < 600; ++i) {
      seen = read_file(log);
      if (seen.find(text) != std::string::npos) break;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return seen;
  }

  std::string dir_;
  std::vector<std::string> servers_;
};

TEST_F(FirstHourCliTest, VersionNamesTheRelease) {
  CliRun r = run_cli("--version");
  EXPECT_EQ(r.exit_code, 0) << r.out;
  EXPECT_EQ(r.out.rfind("loragate 0.", 0), 0u) << r.out;
  EXPECT_NE(r.out.find("backends: cpu"), std::string::npos) << r.out;
}

TEST_F(FirstHourCliTest, TrainRefusesToOverwriteAFinishedAdapterUnlessAsked) {
  std::ofstream(dir_ + "/data.jsonl") << R"({"prompt": "Once upon", "completion": " a time"})" << "\n"
                                      << R"({"prompt": "The cat", "completion": " sat down"})" << "\n";
  const std::string train = "train --base " + dir_ + "/m --data " + dir_ + "/data.jsonl --steps 1 --batch 1 --rank 2 --out " +
                            dir_ + "/adapter";
  CliRun first = run_cli(train);
  ASSERT_EQ(first.exit_code, 0) << first.out;
  const std::string before = read_file(dir_ + "/adapter/adapter_config.json");

  CliRun again = run_cli(train + " --seed 9");
  EXPECT_NE(again.exit_code, 0) << again.out;
  EXPECT_NE(again.out.find("is not empty"), std::string::npos) << again.out;
  EXPECT_NE(again.out.find("--overwrite"), std::string::npos) << again.out;
  EXPECT_EQ(read_file(dir_ + "/adapter/adapter_config.json"), before) << "the finished adapter is untouched";

  CliRun overwrite = run_cli(train + " --seed 9 --overwrite");
  EXPECT_EQ(overwrite.exit_code, 0) << overwrite.out;
}

TEST_F(FirstHourCliTest, AdminCliWaitsForAStartingServerAndNamesTheServerSideFixFor403) {
  const int port = unused_port();
  start_server("--model " + dir_ + "/m --port " + std::to_string(port), dir_ + "/serve.log", 1.0);
  // Run at once, as the README's `serve ... &` is followed by `adapter add`.
  CliRun r = run_cli("adapter ls --url http://127.0.0.1:" + std::to_string(port) + " --wait 60 --token x");
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("waiting for the server"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("403"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("started without an admin token"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("LORAGATE_ADMIN_TOKEN"), std::string::npos) << r.out;

  // With --model and no registry configured, the server keeps its own and says where.
  const std::string log = wait_for(dir_ + "/serve.log", "try:");
  const size_t at = log.find("loragate: registry .cache/loragate/m-");
  ASSERT_NE(at, std::string::npos) << log;
  const std::string path = log.substr(at + 19, log.find('\n', at) - at - 19);
  EXPECT_TRUE(std::filesystem::exists(dir_ + "/" + path)) << path;
  EXPECT_NE(log.find("  base m (serving, loaded): 0 adapter(s)"), std::string::npos) << log;
}

TEST_F(FirstHourCliTest, NothingListeningFailsAfterTheWaitNamingTheUrl) {
  const int port = unused_port();
  const auto t0 = std::chrono::steady_clock::now();
  CliRun r = run_cli("scenario ls --url http://127.0.0.1:" + std::to_string(port) + " --wait 1");
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_GE(s, 0.9) << "it kept trying for --wait seconds";
  EXPECT_LT(s, 20.0);
  EXPECT_NE(r.out.find("is `loragate serve` running there?"), std::string::npos) << r.out;
}

TEST_F(FirstHourCliTest, AQuantisedFolderIsServedAsItsOwnDtype) {
  CliRun q = run_cli("quantize --model " + dir_ + "/m --dtype int8 --out " + dir_ + "/q");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  start_server("--model " + dir_ + "/q --port 0", dir_ + "/q.log");
  const std::string log = wait_for(dir_ + "/q.log", "try:");
  EXPECT_NE(log.find("was quantised to int8: serving it as int8"), std::string::npos) << log;
  EXPECT_NE(log.find("serving 'q'"), std::string::npos) << log;

  // --dtype names the storage; one the folder cannot be held as is refused, naming it.
  CliRun bad = run_cli("serve --model " + dir_ + "/q --port 0 --dtype int4 --registry " + dir_ + "/bad.db");
  EXPECT_NE(bad.exit_code, 0) << bad.out;
  EXPECT_NE(bad.out.find("int4"), std::string::npos) << bad.out;
}

}  // namespace
}  // namespace loragate
