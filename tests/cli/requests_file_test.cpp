// `loragate generate --requests`: a JSONL file mixing base and adapter
// prompts runs through the scheduler together and prints the golden ids.
#include <gtest/gtest.h>

#include <fstream>
#include <nlohmann/json.hpp>
#include <sstream>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(RequestsFileTest, MixedBaseAndAdapterPromptsGiveGoldenIds) {
  LG_REQUIRE_SHARED("models/golden.json");
  LG_REQUIRE_SHARED("models/stories260K-lora/a/adapter_model.safetensors");
  std::ifstream in(testing::shared_dir() + "/models/golden.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  const std::string dir = testing::make_temp_dir("lg-requests");
  std::ofstream reqs(dir + "/requests.jsonl");
  std::map<std::string, nlohmann::json> expected;
  for (size_t i = 0; i < golden.at("cases").size(); ++i) {
    const auto& c = golden.at("cases")[i];
    for (const std::string v : {"base", "a", "b", "c"}) {
      const std::string id = std::to_string(i) + "-" + v;
      nlohmann::json line = {{"id", id}, {"prompt", c.at("prompt")}, {"max_tokens", 48}, {"temperature", 0}};
      line["adapter"] = v == "base" ? nlohmann::json(nullptr)
                                    : nlohmann::json(testing::shared_dir() + "/models/stories260K-lora/" + v);
      reqs << line.dump() << "\n";
      expected[id] = c.at("outputs").at(v).at("generated_ids");
    }
  }
  reqs.close();
  CliRun r = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K --requests " + dir +
                     "/requests.jsonl --max-batched-tokens 32 --kv-blocks 40");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  std::istringstream lines(r.out);
  std::string line;
  size_t seen = 0;
  while (std::getline(lines, line)) {
    const nlohmann::json out = nlohmann::json::parse(line);
    const std::string id = out.at("id");
    EXPECT_EQ(out.at("generated_ids"), expected.at(id)) << id;
    EXPECT_GE(out.at("ttft_ms").get<double>(), 0.0);
    EXPECT_GT(out.at("tbt_ms_mean").get<double>(), 0.0);
    ++seen;
  }
  EXPECT_EQ(seen, 24u);
}

TEST(RequestsFileTest, BadLineNamesFileAndLine) {
  LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
  const std::string dir = testing::make_temp_dir("lg-requests-bad");
  std::ofstream(dir + "/r.jsonl") << "{\"prompt\": \"hi\"}\n{\"prompt\": \"hi\", \"max_tokens\": -4}\n";
  CliRun r = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K --requests " + dir + "/r.jsonl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("r.jsonl:2"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("max_tokens"), std::string::npos) << r.out;

  std::ofstream(dir + "/r2.jsonl") << "{\"prompt\": \"hi\", \"adapter\": \"" << dir << "/missing\"}\n";
  r = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K --requests " + dir + "/r2.jsonl");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("r2.jsonl:1"), std::string::npos) << r.out;
}

TEST(RequestsFileTest, SingleAdapterFlagGivesGoldenIds) {
  LG_REQUIRE_SHARED("models/stories260K-lora/b/adapter_model.safetensors");
  std::ifstream in(testing::shared_dir() + "/models/golden.json");
  const nlohmann::json golden = nlohmann::json::parse(in);
  CliRun r = run_cli("generate --model " + testing::shared_dir() + "/models/stories260K --adapter " +
                     testing::shared_dir() + "/models/stories260K-lora/b --prompt \"Once upon a time\" -n 48 "
                     "--temperature 0 --ids");
  ASSERT_EQ(r.exit_code, 0) << r.out;
  const nlohmann::json line = nlohmann::json::parse(last_line(r.out));
  EXPECT_EQ(line.at("generated_ids"), golden.at("cases")[0].at("outputs").at("b").at("generated_ids"));
}

}  // namespace
}  // namespace loragate
