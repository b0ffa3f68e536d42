// `loragate bench serve-gap` on a tiny synthetic model: it runs both sides,
// prints the ratio, checks the tokens, and reports a child that cannot serve.
#include <gtest/gtest.h>

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <string>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

class ServeGapCliTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = testing::make_temp_dir("lg-serve-gap-cli");
    CliRun w = run_cli("synth-model --out " + dir_ + "/m --preset tiny --seed 5");
    ASSERT_EQ(w.exit_code, 0) << w.out;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }
  std::string gap(const std::string& flags) const {
    return "bench serve-gap --model " + dir_ + "/m --dtype f32 --requests 2 --prompt-len 4 --new-tokens 3 " + flags;
  }
  std::string dir_;
};

TEST_F(ServeGapCliTest, PrintsTheRatioWithAdapters) {
  CliRun r = run_cli(gap("--reps 2 --adapters 2 --adapters-dir " + dir_ + "/adapters"));
  ASSERT_EQ(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("ratio http/engine: "), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("every request generated 3 tokens on both sides, with the same text"), std::string::npos)
      << r.out;
  EXPECT_NE(r.out.find("lg-step"), std::string::npos) << "thread usage names the step thread:\n" << r.out;
}

TEST_F(ServeGapCliTest, APortInUseShowsTheChildsError) {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr), 0);
  ASSERT_EQ(listen(fd, 1), 0);
  socklen_t len = sizeof addr;
  ASSERT_EQ(getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len), 0);
  const int port = ntohs(addr.sin_port);
  CliRun r = run_cli(gap("--reps 1 --no-thread-usage --port " + std::to_string(port)));
  close(fd);
  EXPECT_NE(r.exit_code, 0) << r.out;
  EXPECT_NE(r.out.find("loragate serve exited with status"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("cannot bind"), std::string::npos) << "the child's own words:\n" << r.out;
}

TEST(ServeGapCliErrors, AMissingModelSaysHowToMakeOne) {
  CliRun r = run_cli("bench serve-gap --model /nonexistent/m110");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("synth-model --out /nonexistent/m110"), std::string::npos) << r.out;
}

}  // namespace
}  // namespace loragate
