// Fixtures of the training-data tests: a character-level tokenizer with
// ChatML's special tokens (no ../shared needed) and JSONL files in a temp dir.
#pragma once

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "tests/test_util.h"
#include "tokenizer/tokenizer.h"

namespace loragate::testing {

// Ids of the character tokenizer's special tokens.
inline constexpr int32_t kCharBos = 0;      // <s>
inline constexpr int32_t kCharEos = 1;      // </s>
inline constexpr int32_t kCharImStart = 2;  // <|im_start|>
inline constexpr int32_t kCharImEnd = 3;    // <|im_end|>

// One token per printable ASCII character and "\n", one merge ("t" "i" ->
// "ti", so that a completion can merge with its prompt's last character),
// BOS added by its post-processor, and <s>, </s>, <|im_start|>, <|im_end|>
// as special added tokens.
inline std::unique_ptr<Tokenizer> make_char_tokenizer() {
  using nlohmann::json;
  json vocab = {{"<s>", kCharBos}, {"</s>", kCharEos}, {"<|im_start|>", kCharImStart}, {"<|im_end|>", kCharImEnd}};
  int32_t id = 4;
  vocab["\n"] = id++;
  for (char c = ' '; c <= '~'; ++c) vocab[std::string(1, c)] = id++;
  vocab["ti"] = id++;
  json added = json::array();
  for (const char* special : {"<s>", "</s>", "<|im_start|>", "<|im_end|>"}) {
    added.push_back({{"id", vocab[special]}, {"content", special}, {"special", true}, {"normalized", false}});
  }
  const json post = {
      {"type", "TemplateProcessing"},
      {"single", json::array({{{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}},
                              {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}})},
      {"special_tokens", {{"<s>", {{"id", "<s>"}, {"ids", {kCharBos}}, {"tokens", {"<s>"}}}}}}};
  const json tokenizer = {{"version", "1.0"},
                          {"added_tokens", added},
                          {"post_processor", post},
                          {"model", {{"type", "BPE"}, {"vocab", vocab}, {"merges", {"t i"}}}}};
  const std::string dir = make_temp_dir("lg-char-tok");
  std::ofstream(dir + "/tokenizer.json") << tokenizer.dump();
  Result<std::unique_ptr<Tokenizer>> loaded = Tokenizer::load(dir);
  std::filesystem::remove_all(dir);
  EXPECT_TRUE(loaded.is_ok()) << loaded.status().to_string();
  return loaded.is_ok() ? std::move(loaded).value() : nullptr;
}

// A temp dir for JSONL files, removed with the object.
class TrainFiles {
 public:
  TrainFiles() : dir_(make_temp_dir("lg-train-data")) {}
  ~TrainFiles() { std::filesystem::remove_all(dir_); }
  TrainFiles(const TrainFiles&) = delete;
  TrainFiles& operator=(const TrainFiles&) = delete;

  // Writes `bytes` as dir/name and returns its path.
  std::string write(const std::string& name, const std::string& bytes) const {
    const std::string path = dir_ + "/" + name;
    std::ofstream(path, std::ios::binary) << bytes;
    return path;
  }
  // One line per JSON value.
  std::string write_lines(const std::string& name, const std::vector<nlohmann::json>& lines) const {
    std::string bytes;
    for (const nlohmann::json& line : lines) bytes += line.dump() + "\n";
    return write(name, bytes);
  }
  const std::string& dir() const { return dir_; }

 private:
  std::string dir_;
};

}  // namespace loragate::testing
