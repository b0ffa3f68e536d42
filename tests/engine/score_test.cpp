// Prompt scoring against independent references: the numpy float64 model
// (data/prompt_logprobs_ref.json, written by data/make_prompt_logprobs.py)
// for stories260K with and without adapters, and the evaluation fixtures'
// recorded reference NLL (../shared/eval/expected_metrics.json) for the
// online and candidate-good bases with their scenario adapters.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>

#include "engine/cpu_model_runner.h"
#include "engine/engine.h"
#include "kernels/cpu/ops.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr double kTolerance = 1e-4;  // per token, f32 engine vs float64 reference

nlohmann::json read_json(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return nlohmann::json::parse(in);
}

std::vector<nlohmann::json> read_jsonl(const std::string& path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  std::vector<nlohmann::json> rows;
  for (std::string line; std::getline(in, line);) {
    if (!line.empty()) rows.push_back(nlohmann::json::parse(line));
  }
  return rows;
}

std::unique_ptr<Engine> load_engine(const std::string& model_dir, const std::map<std::string, std::string>& adapters,
                                    EngineOptions options = {}) {
  auto engine = Engine::load(model_dir, options);
  EXPECT_TRUE(engine.is_ok()) << engine.status().to_string();
  if (!engine.is_ok()) return nullptr;
  for (const auto& [name, dir] : adapters) {
    const Status s = (*engine)->adapters()->add(name, dir);
    EXPECT_TRUE(s.is_ok()) << s.to_string();
  }
  return std::move(engine).value();
}

GenerationRequest pure_score(std::vector<int32_t> ids, int64_t from, const std::string& adapter, int32_t top_n = 0) {
  GenerationRequest r;
  r.prompt_ids = std::move(ids);
  r.prompt_logprobs = top_n;
  r.score_from = from;
  r.params.max_tokens = 0;
  r.adapter = adapter;
  return r;
}

double nll_sum(const std::vector<TokenLogprobs>& scored) {
  double sum = 0;
  for (const TokenLogprobs& lp : scored) sum -= lp.logprob;
  return sum;
}

struct RefCase {
  int prompt = 0;
  std::string adapter;
  std::vector<int32_t> ids;
  std::vector<double> logprobs;  // entry k scores ids[k + 1]
};

class ScoreReferenceTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    LG_REQUIRE_SHARED("models/stories260K-lora/a");
    LG_REQUIRE_SHARED("models/golden.json");
    const auto here = std::filesystem::path(__FILE__).parent_path();
    const auto ref = read_json((here / "data/prompt_logprobs_ref.json").string());
    for (const auto& c : ref.at("cases")) {
      cases_.push_back({c.at("prompt").get<int>(), c.at("adapter").get<std::string>(),
                        c.at("ids").get<std::vector<int32_t>>(), c.at("logprobs").get<std::vector<double>>()});
    }
    ASSERT_EQ(cases_.size(), 12u);
    const auto golden = read_json(testing::shared_dir() + "/models/golden.json");
    for (const RefCase& c : cases_) {
      prompt_sizes_.push_back(golden.at("cases").at(c.prompt).at("prompt_ids").size());
    }
  }

  std::unique_ptr<Engine> make_engine(EngineOptions options = {}) {
    const std::string lora = testing::shared_dir() + "/models/stories260K-lora/";
    return load_engine(testing::shared_dir() + "/models/stories260K",
                       {{"a", lora + "a"}, {"b", lora + "b"}, {"c", lora + "c"}}, options);
  }

  std::vector<RefCase> cases_;
  std::vector<size_t> prompt_sizes_;  // golden prompt of each case; the rest of its ids are greedy outputs
};

TEST_F(ScoreReferenceTest, EveryTokenMatchesTheFloat64Reference) {
  EngineOptions options;
  options.max_num_batched_tokens = 24;  // chunked, all twelve in one batch
  auto engine = make_engine(options);
  std::vector<GenerationRequest> reqs;
  for (const RefCase& c : cases_) reqs.push_back(pure_score(c.ids, 1, c.adapter, 5));
  auto results = engine->generate(std::move(reqs));
  ASSERT_TRUE(results.is_ok()) << results.status().to_string();

  double worst = 0;
  for (size_t i = 0; i < cases_.size(); ++i) {
    const RefCase& c = cases_[i];
    const auto& scored = (*results)[i].prompt_logprobs;
    ASSERT_EQ(scored.size(), c.logprobs.size());
    for (size_t k = 0; k < scored.size(); ++k) {
      const std::string where = "adapter '" + c.adapter + "' prompt " + std::to_string(c.prompt) + " token " +
                                std::to_string(k + 1);
      EXPECT_EQ(scored[k].token, c.ids[k + 1]) << where;
      EXPECT_NEAR(scored[k].logprob, c.logprobs[k], kTolerance) << where;
      worst = std::max(worst, std::abs(scored[k].logprob - c.logprobs[k]));
      const auto& top = scored[k].top;
      ASSERT_EQ(top.size(), 5u) << where;
      for (size_t j = 1; j < top.size(); ++j) {
        EXPECT_TRUE(top[j - 1].second > top[j].second ||
                    (top[j - 1].second == top[j].second && top[j - 1].first < top[j].first))
            << where << ": alternatives out of order";
      }
      EXPECT_GE(top[0].second, scored[k].logprob) << where;
      // The rank places the token among the alternatives, or after them.
      const auto in_top =
          std::find_if(top.begin(), top.end(), [&](const auto& t) { return t.first == scored[k].token; });
      EXPECT_EQ(scored[k].rank > 5, in_top == top.end()) << where;
      if (in_top != top.end()) {
        EXPECT_EQ(scored[k].rank, in_top - top.begin() + 1) << where;
      } else {
        EXPECT_LE(scored[k].logprob, top.back().second) << where;
      }
      // After the prompt come the greedy outputs: each is the argmax of the logits before it.
      if (k + 1 >= prompt_sizes_[i]) {
        EXPECT_EQ(top[0].first, scored[k].token) << where << ": the greedy token must be the most likely";
        EXPECT_EQ(scored[k].rank, 1) << where;
        EXPECT_EQ(top[0].second, scored[k].logprob) << where;
      }
    }
  }
  std::printf("prompt logprobs: largest |engine - float64 reference| = %.3g\n", worst);
}

// The engine's scored rows are the model's logits at every position, as one
// whole-sequence forward pass that keeps all rows computes them.
TEST_F(ScoreReferenceTest, ScoredRowsEqualAWholeSequenceForwardPass) {
  const RefCase& c = cases_[0];
  ASSERT_EQ(c.adapter, "");
  auto engine = make_engine();
  auto results = engine->generate({pure_score(c.ids, 1, "", 3)});
  ASSERT_TRUE(results.is_ok());

  ASSERT_NE(cpu_model(engine->runner()), nullptr);
  const LlamaModel& model = *cpu_model(engine->runner());
  const int64_t n = static_cast<int64_t>(c.ids.size());
  const int64_t vocab = model.config().vocab_size;
  auto cache = KvCache::create(model.config(), 16, 8, 0);
  ASSERT_TRUE(cache.is_ok());
  BlockManager blocks(8, 16);
  BlockTable table;
  ASSERT_TRUE(blocks.grow(table, n).is_ok());
  ForwardBatch batch;
  batch.tokens = c.ids;
  for (int64_t i = 0; i < n; ++i) batch.positions.push_back(static_cast<int32_t>(i));
  batch.seqs.push_back({0, n, 0, table.data(), /*logits_begin=*/0, /*num_logits=*/n});
  ForwardWorkspace ws;
  std::vector<float> logits(static_cast<size_t>(n * vocab));
  ASSERT_TRUE(model.forward(batch, *cache, ws, logits.data()).is_ok());
  for (int64_t k = 0; k + 1 < n; ++k) {
    const float* row = logits.data() + k * vocab;
    const TokenLogprobs want = compute_logprobs(row, vocab, c.ids[k + 1], 3);
    const TokenLogprobs& got = results->front().prompt_logprobs[k];
    EXPECT_EQ(got.logprob, want.logprob) << "token " << k + 1;
    EXPECT_EQ(got.top, want.top) << "token " << k + 1;
    EXPECT_EQ(got.top[0].first, cpu::argmax(row, vocab)) << "token " << k + 1;
  }
}

// The evaluation fixtures: the reference NLL of eval items, per scenario, for
// the online and candidate-good bases with their scenario adapters (and
// without), and the generic held-out NLL of each base.
class ScoreEvalTest : public ::testing::Test {
 protected:
  void SetUp() override {
    LG_REQUIRE_SHARED("eval/expected_metrics.json");
    LG_REQUIRE_SHARED("models/stories260K/model.safetensors");
    metrics_ = read_json(eval_dir() + "/expected_metrics.json");
  }

  static std::string eval_dir() { return testing::shared_dir() + "/eval"; }
  static std::string base_dir(const std::string& base) {
    return base == "online" ? testing::shared_dir() + "/models/stories260K" : eval_dir() + "/bases/" + base;
  }

  nlohmann::json metrics_;
};

TEST_F(ScoreEvalTest, ReferenceNllOfEvalItemsMatchesExpectedMetrics) {
  constexpr size_t kItemsPerScenario = 4;
  const std::vector<std::string> scenarios = {"mia", "cat", "sunny"};
  size_t compared = 0;
  double worst = 0;  // per reference token
  for (const std::string base : {"online", "candidate-good"}) {
    std::map<std::string, std::string> adapters;
    for (const std::string& s : scenarios) adapters[s] = eval_dir() + "/adapters/" + base + "/" + s;
    auto engine = load_engine(base_dir(base), adapters);
    ASSERT_NE(engine, nullptr);

    std::vector<GenerationRequest> reqs;
    std::vector<std::pair<const nlohmann::json*, int64_t>> expected;  // (recorded item, n_ref_tokens)
    for (const std::string& s : scenarios) {
      const std::vector<nlohmann::json> items = read_jsonl(eval_dir() + "/scenarios/" + s + "/eval.jsonl");
      ASSERT_GE(items.size(), kItemsPerScenario);
      for (const char* variant : {"adapter", "no_adapter"}) {
        const auto& recorded = metrics_.at("results").at(base).at(s).at(variant).at("items");
        for (size_t j = 0; j < kItemsPerScenario; ++j) {
          ASSERT_EQ(recorded.at(j).at("id"), items[j].at("id"));
          std::vector<int32_t> ids = items[j].at("prompt_ids").get<std::vector<int32_t>>();
          const int64_t from = static_cast<int64_t>(ids.size());
          for (int32_t t : items[j].at("reference_ids")) ids.push_back(t);
          reqs.push_back(pure_score(std::move(ids), from, std::string(variant) == "adapter" ? s : ""));
          expected.emplace_back(&recorded.at(j), recorded.at(j).at("n_ref_tokens").get<int64_t>());
        }
      }
    }
    auto results = engine->generate(std::move(reqs));
    ASSERT_TRUE(results.is_ok()) << results.status().to_string();
    for (size_t i = 0; i < results->size(); ++i) {
      const auto& [recorded, n_ref] = expected[i];
      const auto& scored = (*results)[i].prompt_logprobs;
      ASSERT_EQ(static_cast<int64_t>(scored.size()), n_ref);
      const double want = recorded->at("nll_sum").get<double>();
      EXPECT_NEAR(nll_sum(scored), want, kTolerance * static_cast<double>(n_ref))
          << base << " " << recorded->at("id").get<std::string>() << " adapter '" << (*results)[i].adapter << "'";
      worst = std::max(worst, std::abs(nll_sum(scored) - want) / static_cast<double>(n_ref));
      ++compared;
    }
  }
  EXPECT_EQ(compared, 2u * 3u * 2u * kItemsPerScenario);
  std::printf("eval items: largest |nll_sum - expected| per reference token = %.3g\n", worst);
}

// Only aggregates are recorded for the held-out rows: all 32 are scored and
// the token-weighted mean compared.
TEST_F(ScoreEvalTest, GenericHeldoutNllMeanMatchesExpectedMetrics) {
  const std::vector<nlohmann::json> rows = read_jsonl(eval_dir() + "/generic/heldout.jsonl");
  ASSERT_EQ(rows.size(), 32u);
  for (const std::string base : {"online", "candidate-good", "candidate-bad"}) {
    auto engine = load_engine(base_dir(base), {});
    ASSERT_NE(engine, nullptr);
    std::vector<GenerationRequest> reqs;
    for (const auto& row : rows) reqs.push_back(pure_score(row.at("ids").get<std::vector<int32_t>>(), 1, ""));
    auto results = engine->generate(std::move(reqs));
    ASSERT_TRUE(results.is_ok()) << results.status().to_string();
    double sum = 0;
    int64_t tokens = 0;
    for (const GenerationResult& r : *results) {
      sum += nll_sum(r.prompt_logprobs);
      tokens += static_cast<int64_t>(r.prompt_logprobs.size());
    }
    const auto& want = metrics_.at("generic_heldout").at(base);
    EXPECT_EQ(tokens, want.at("n_tokens").get<int64_t>()) << base;
    const double error = std::abs(sum / static_cast<double>(tokens) - want.at("nll_mean").get<double>());
    EXPECT_LT(error, 1e-5) << base;
    std::printf("generic held-out %s: |nll_mean - expected| = %.3g\n", base.c_str(), error);
  }
}

}  // namespace
}  // namespace loragate
