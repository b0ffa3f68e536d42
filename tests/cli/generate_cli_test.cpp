// Runs the real `loragate` binary and checks what it prints.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(GenerateCliTest, PrintsTheGoldenIds) {
  LG_REQUIRE_SHARED("models/golden.json");
  std::ifstream in(testing::shared_dir() + "/models/golden.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  const auto& c = golden.at("cases").at(0);
  ASSERT_EQ(c.at("prompt"), "Once upon a time");

  CliRun r = run_cli("generate --model " + testing::shared_dir() +
              "/models/stories260K --prompt \"Once upon a time\" -n 48 --temperature 0 --ids");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json line = nlohmann::json::parse(last_line(r.out));
  EXPECT_EQ(line.at("prompt_ids"), c.at("prompt_ids"));
  EXPECT_EQ(line.at("generated_ids"), c.at("outputs").at("base").at("generated_ids"));
  EXPECT_EQ(r.out.substr(0, r.out.find('\n')), c.at("outputs").at("base").at("full_text").get<std::string>());
}

TEST(GenerateCliTest, AnEmptyPromptIsBosAlone) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  CliRun r = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K --prompt \"\" -n 4 --temperature 0 --ids");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json line = nlohmann::json::parse(last_line(r.out));
  EXPECT_EQ(line.at("prompt_ids"), nlohmann::json::array({1}));
  EXPECT_EQ(line.at("generated_ids").size(), 4u);
  CliRun neither = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K");
  EXPECT_NE(neither.exit_code, 0);
  EXPECT_NE(neither.out.find("exactly one of --prompt and --requests"), std::string::npos) << neither.out;
}

TEST(GenerateCliTest, MissingModelIsAClearError) {
  CliRun r = run_cli("generate --model /nonexistent/model --prompt hi");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("/nonexistent/model"), std::string::npos) << r.out;
}

TEST(GenerateCliTest, BadDtypeIsAClearError) {
  LG_REQUIRE_SHARED("models/stories260K/config.json");
  CliRun r = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K --prompt hi --dtype f8");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("dtype must be one of f32, bf16, int8"), std::string::npos) << r.out;
}

TEST(SynthModelCliTest, WritesAModelThatGenerates) {
  const std::string dir = testing::make_temp_dir("lg-synth-cli");
  CliRun w = run_cli("synth-model --out " + dir + "/m --preset tiny --seed 3");
  ASSERT_EQ(w.exit_code, 0) << w.out;
  CliRun g = run_cli("generate --model " + dir + "/m --prompt \"hello world\" -n 5 --temperature 0 --ids");
  ASSERT_EQ(g.exit_code, 0) << g.out;
  const nlohmann::json line = nlohmann::json::parse(last_line(g.out));
  EXPECT_EQ(line.at("generated_ids").size(), 5u);
}

// A quantised copy generates what quantising at load generates, and only as its own type.
TEST(QuantizeCliTest, WritesACopyThatGeneratesAsQuantisingAtLoad) {
  const std::string dir = testing::make_temp_dir("lg-quantize-cli");
  ASSERT_EQ(run_cli("synth-model --out " + dir + "/m --preset tiny --seed 3").exit_code, 0);
  CliRun q = run_cli("quantize --model " + dir + "/m --dtype int4 --out " + dir + "/m-int4");
  ASSERT_EQ(q.exit_code, 0) << q.out;
  EXPECT_NE(q.out.find("sha256 "), std::string::npos) << q.out;
  const std::string gen = " --prompt \"hello world\" -n 8 --temperature 0 --ids";
  CliRun from_file = run_cli("generate --model " + dir + "/m-int4 --dtype int4" + gen);
  CliRun at_load = run_cli("generate --model " + dir + "/m --dtype int4" + gen);
  ASSERT_EQ(from_file.exit_code, 0) << from_file.out;
  EXPECT_EQ(from_file.out, at_load.out);
  CliRun wrong = run_cli("generate --model " + dir + "/m-int4 --dtype bf16" + gen);
  EXPECT_NE(wrong.exit_code, 0);
  EXPECT_NE(wrong.out.find("quantised as int4"), std::string::npos) << wrong.out;
  CliRun bad = run_cli("quantize --model " + dir + "/m --dtype int3 --out " + dir + "/x");
  EXPECT_NE(bad.exit_code, 0);
  EXPECT_NE(bad.out.find("int4-asym"), std::string::npos) << bad.out;  // lists the valid names
}

}  // namespace
}  // namespace loragate
