// `loragate train --init-from DIR`: a run that starts from an adapter trained
// before (a warm start) instead of PEFT's initialisation. With a learning rate
// of 0 the written adapter is the starting one, bit for bit: the start is
// exactly what was loaded. The adapter decides the LoRA shape, and the record
// names where the run started.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include <nlohmann/json.hpp>

#include "tests/cli/cli_runner.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

std::string read_all(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

TEST(TrainInitFromCliTest, AWarmStartBeginsFromTheAdapterAndKeepsItsShape) {
  const std::string dir = testing::make_temp_dir("lg-train-init-from");
  ASSERT_EQ(run_cli("synth-model --out " + dir + "/m --preset tiny --seed 4").exit_code, 0);
  std::ofstream(dir + "/data.jsonl") << R"({"prompt": "Once upon", "completion": " a time"})" << "\n"
                                     << R"({"prompt": "The cat", "completion": " sat down"})" << "\n";
  const std::string base = "train --base " + dir + "/m --data " + dir + "/data.jsonl --batch 2 ";
  CliRun first = run_cli(base + "--steps 3 --rank 2 --alpha 6 --targets q,v --out " + dir + "/first");
  ASSERT_EQ(first.exit_code, 0) << first.out;

  CliRun warm = run_cli(base + "--steps 1 --lr 0 --init-from " + dir + "/first --out " + dir + "/warm");
  ASSERT_EQ(warm.exit_code, 0) << warm.out;
  EXPECT_EQ(read_all(dir + "/warm/adapter_model.safetensors"), read_all(dir + "/first/adapter_model.safetensors"))
      << "lr 0: the written adapter is the one it started from";
  const nlohmann::json config = nlohmann::json::parse(read_all(dir + "/warm/adapter_config.json"));
  EXPECT_EQ(config["r"], 2);
  EXPECT_EQ(config["lora_alpha"], 6.0);
  const nlohmann::json record = nlohmann::json::parse(read_all(dir + "/warm/training.json"));
  ASSERT_TRUE(record.contains("init_from")) << record.dump();
  EXPECT_EQ(std::filesystem::canonical(record["init_from"]["path"].get<std::string>()),
            std::filesystem::canonical(dir + "/first"));
  EXPECT_EQ(record["init_from"]["sha256"].get<std::string>().size(), 64u);

  // A fresh start from the same data differs: the warm start was not ignored.
  CliRun fresh = run_cli(base + "--steps 1 --lr 0 --rank 2 --alpha 6 --targets q,v --out " + dir + "/fresh");
  ASSERT_EQ(fresh.exit_code, 0) << fresh.out;
  EXPECT_NE(read_all(dir + "/fresh/adapter_model.safetensors"), read_all(dir + "/first/adapter_model.safetensors"));

  // The shape is the adapter's: a flag that would change it is refused, naming it.
  CliRun shaped = run_cli(base + "--steps 1 --rank 4 --init-from " + dir + "/first --out " + dir + "/shaped");
  EXPECT_NE(shaped.exit_code, 0) << shaped.out;
  EXPECT_NE(shaped.out.find("--rank does not go with --init-from"), std::string::npos) << shaped.out;
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate
