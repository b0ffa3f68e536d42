// run_suite and the ArmEngines on tiny synthetic bases (model/synth_model.h,
// written once per process): the arms' order drawn per item, rows that do
// not finish or do not fit max_model_len recorded instead of failing the run
// or scoring 0, the bytes and tokenizer identities that per-byte gates need,
// latency repeats, and a cancelled evaluation still ending the run.
#include "evaluator/runner.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>

#include "adapters/synth_adapter.h"
#include "bases/serving_base.h"
#include "common/sha256.h"
#include "evaluator/metrics.h"
#include "evaluator/runner_order.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate::eval {
namespace {

constexpr int64_t kMaxModelLen = 64;
constexpr const char* kReference = " there was a cat.";  // 17 bytes

// ---- the order of an item's arms -----------------------------------------------------

bool online_first(const std::vector<size_t>& order) {
  return std::find(order.begin(), order.end(), size_t{0}) < std::find(order.begin(), order.end(), size_t{1});
}

TEST(ArmOrder, EachItemGetsAPermutationWithOnlineAndCandidateFirstInTurn) {
  std::set<std::vector<size_t>> distinct;
  std::set<size_t> first_arms;
  int online_first_items = 0;
  for (size_t i = 0; i < 40; ++i) {
    const std::vector<size_t> order = arm_order(7, "mia", i, 4);
    std::vector<size_t> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    ASSERT_EQ(sorted, (std::vector<size_t>{0, 1, 2, 3})) << "item " << i;
    if (i > 0) {
      EXPECT_NE(online_first(order), online_first(arm_order(7, "mia", i - 1, 4))) << "item " << i;
    }
    online_first_items += online_first(order) ? 1 : 0;
    distinct.insert(order);
    first_arms.insert(order.front());
  }
  EXPECT_EQ(online_first_items, 20);
  EXPECT_GT(distinct.size(), 4u);       // more than the alternation alone would give
  EXPECT_EQ(first_arms.size(), 4u);     // every arm runs first on some item
}

TEST(ArmOrder, TheSameSeedDrawsTheSameOrders) {
  std::vector<std::vector<size_t>> a, again, other_seed, other_scenario;
  for (size_t i = 0; i < 20; ++i) {
    a.push_back(arm_order(7, "mia", i, 5));
    again.push_back(arm_order(7, "mia", i, 5));
    other_seed.push_back(arm_order(8, "mia", i, 5));
    other_scenario.push_back(arm_order(7, "cat", i, 5));
  }
  EXPECT_EQ(a, again);
  EXPECT_NE(a, other_seed);
  EXPECT_NE(a, other_scenario);
}

TEST(ArmOrder, TwoArmsAlternateAndOneArmIsAlone) {
  EXPECT_EQ(arm_order(3, "s", 0, 1), (std::vector<size_t>{0}));
  const std::vector<size_t> first = arm_order(3, "s", 0, 2), second = arm_order(3, "s", 1, 2);
  EXPECT_NE(first, second);
  EXPECT_EQ(first, arm_order(3, "s", 2, 2));
}

// ---- fixtures ------------------------------------------------------------------------

// models/{a,b} share a tokenizer (other weights), models/c has another one;
// adapters/{online,candidate}/s are the scenario's adapters.
Status write_fixtures(const std::string& root) {
  SynthOptions model;
  for (const auto& [name, seed] : {std::pair<const char*, uint64_t>{"a", 1}, {"b", 2}, {"c", 3}}) {
    model.seed = seed;
    LG_RETURN_IF_ERROR(write_synth_model(root + "/models/" + name, model));
  }
  LG_ASSIGN_OR_RETURN(std::string other_tokenizer, synth_tokenizer_json(400));
  std::ofstream(root + "/models/c/tokenizer.json") << other_tokenizer;
  LG_ASSIGN_OR_RETURN(ModelConfig config, synth_preset_config("tiny"));
  SynthAdapterOptions adapter;
  adapter.rank = 8;
  adapter.lora_alpha = 16;
  adapter.seed = 11;
  LG_RETURN_IF_ERROR(write_synth_adapter(root + "/adapters/online/s", config, adapter));
  adapter.seed = 12;
  return write_synth_adapter(root + "/adapters/candidate/s", config, adapter);
}

EngineOptions engine_options() {
  EngineOptions o;
  o.max_loras = 4;
  o.kv_cache_bytes = 16ll << 20;
  o.max_model_len = kMaxModelLen;
  return o;
}

// Decorates a real arm: rows whose prompt starts with `doomed` come back
// cancelled (as when an engine drops a row), generation latencies can be
// scripted, run() can return a cancelled status from some generation on
// (the whole evaluation cancelled), and generations are counted.
class ScriptedArm final : public ArmEngine {
 public:
  explicit ScriptedArm(std::unique_ptr<ArmEngine> inner) : inner_(std::move(inner)) {}
  std::vector<int32_t> doomed;
  // The k-th generation in a row of the same request gets ttft_script[k % size]; itl one tenth of it.
  std::vector<double> ttft_script;
  int cancel_from = -1;             // generation index from which run() returns cancelled
  int generations = 0;

  Result<std::vector<GenerationResult>> run(std::vector<GenerationRequest> requests) override {
    const bool generation = !requests.empty() && requests.front().params.max_tokens > 0;
    if (generation && cancel_from >= 0 && generations >= cancel_from) return Status::cancelled("stopped");
    std::vector<bool> drop;
    for (const GenerationRequest& r : requests) {
      drop.push_back(!doomed.empty() && r.prompt_ids.size() >= doomed.size() &&
                     std::equal(doomed.begin(), doomed.end(), r.prompt_ids.begin()));
    }
    LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> results, inner_->run(std::move(requests)));
    for (size_t i = 0; i < results.size(); ++i) {
      GenerationResult& r = results[i];
      if (drop[i]) {
        r.finish_reason = FinishReason::kCancelled;
        r.prompt_logprobs.resize(r.prompt_logprobs.size() / 2);
      }
      if (!generation) continue;
      repeat_ = r.prompt_ids == last_prompt_ && r.adapter == last_adapter_ ? repeat_ + 1 : 0;
      last_prompt_ = r.prompt_ids;
      last_adapter_ = r.adapter;
      if (!ttft_script.empty()) {
        r.ttft_ms = ttft_script[repeat_ % ttft_script.size()];
        r.itl_ms = {r.ttft_ms / 10};
      }
      ++generations;
    }
    return results;
  }
  Status add_adapter(const std::string& name, const std::string& path) override {
    return inner_->add_adapter(name, path);
  }
  const Tokenizer& tokenizer() const override { return inner_->tokenizer(); }
  const ChatTemplate& chat_template() const override { return inner_->chat_template(); }
  const std::string& name() const override { return inner_->name(); }
  const std::string& sha256() const override { return inner_->sha256(); }
  const std::string& tokenizer_sha256() const override { return inner_->tokenizer_sha256(); }
  int64_t max_model_len() const override { return inner_->max_model_len(); }

 private:
  std::unique_ptr<ArmEngine> inner_;
  std::vector<int32_t> last_prompt_;
  std::string last_adapter_;
  size_t repeat_ = 0;
};

class RunnerTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    root_ = ::loragate::testing::make_temp_dir("lg-runner-test");
    written_ = root_.empty() ? Status::internal("no temporary directory") : write_fixtures(root_);
  }
  static void TearDownTestSuite() {
    std::error_code ignored;
    if (!root_.empty()) std::filesystem::remove_all(root_, ignored);
  }
  void SetUp() override { ASSERT_TRUE(written_.is_ok()) << written_.to_string(); }

  static std::string model_dir(const std::string& name) { return root_ + "/models/" + name; }

  static std::unique_ptr<ArmEngine> load(const std::string& model) {
    Result<std::unique_ptr<ArmEngine>> arm = load_offline_arm(model, model_dir(model), engine_options());
    EXPECT_TRUE(arm.is_ok()) << arm.status().to_string();
    return arm.is_ok() ? std::move(arm).value() : nullptr;
  }

  static RunnerOptions options() {
    RunnerOptions o;
    o.online_adapters = root_ + "/adapters/online";
    o.candidate_adapters = root_ + "/adapters/candidate";
    o.seed = 5;
    return o;
  }

  // An item with a text prompt and the reference " there was a cat.".
  static EvalItem item(const std::string& id, const std::string& prompt) {
    EvalItem it;
    it.id = id;
    it.prompt = prompt;
    it.reference = kReference;
    it.keyword.type = KeywordRule::Type::kIncludeExclude;
    it.keyword.include_any = {"cat"};
    return it;
  }

  // Scenario "s": `n` ordinary items, 8 greedy tokens each.
  static Suite suite(size_t n) {
    Suite s;
    s.text = "scenarios: {s: {eval: s.jsonl}}";
    ScenarioSpec spec;
    spec.name = "s";
    spec.eval_path = "s.jsonl";
    spec.max_tokens = 8;
    for (size_t i = 0; i < n; ++i) spec.items.push_back(item("s-" + std::to_string(i), "Once upon a time " + std::to_string(i)));
    s.scenarios.push_back(spec);
    return s;
  }

  static inline std::string root_;
  static inline Status written_;
};

const std::vector<std::string> kArms = {"online", "candidate", "online_no_adapter", "candidate_no_adapter"};

// ---- the arms' order, stored ---------------------------------------------------------

TEST_F(RunnerTest, EveryItemStoresItsArmsPlacesAsDrawnFromTheSeed) {
  auto online = load("a"), candidate = load("b");
  ASSERT_TRUE(online && candidate);
  Result<RunResult> run = run_suite(suite(8), *online, *candidate, options());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  const ScenarioResult& s = run->scenarios.at(0);
  for (size_t i = 0; i < 8; ++i) {
    const std::vector<size_t> drawn = arm_order(options().seed, "s", i, kArms.size());
    for (size_t place = 0; place < drawn.size(); ++place) {
      EXPECT_EQ(s.arms.at(kArms[drawn[place]]).items[i].order, static_cast<int32_t>(place)) << "item " << i;
    }
    const bool online_ahead = s.arms.at("online").items[i].order < s.arms.at("candidate").items[i].order;
    EXPECT_EQ(online_ahead, online_first(drawn));
  }

  Result<RunResult> again = run_suite(suite(8), *online, *candidate, options());
  ASSERT_TRUE(again.is_ok()) << again.status().to_string();
  for (const std::string& arm : kArms) {
    for (size_t i = 0; i < 8; ++i) {
      EXPECT_EQ(again->scenarios[0].arms.at(arm).items[i].order, s.arms.at(arm).items[i].order);
      EXPECT_EQ(again->scenarios[0].arms.at(arm).items[i].generated_ids, s.arms.at(arm).items[i].generated_ids);
    }
  }
}

// ---- rows that do not finish ---------------------------------------------------------

TEST_F(RunnerTest, RowsLongerThanTheModelAreRecordedAndTheRunGoesOn) {
  auto online = load("a"), candidate = load("b");
  ASSERT_TRUE(online && candidate);
  const std::vector<int32_t> word = online->tokenizer().encode(" cat", /*add_special_tokens=*/false);
  ASSERT_FALSE(word.empty());
  Suite s = suite(3);
  EvalItem too_long = item("too-long", "");  // 60 prompt tokens + 8 generated > 64: refused
  too_long.prompt_ids.assign(60, word.front());
  too_long.reference_ids.assign(10, word.front());
  EvalItem cut = item("ref-cut", "");  // 40 + 8 generated fit; 40 + 30 reference do not
  cut.prompt_ids.assign(40, word.front());
  cut.reference_ids.assign(30, word.front());
  s.scenarios[0].items.push_back(too_long);
  s.scenarios[0].items.push_back(cut);

  Result<RunResult> run = run_suite(s, *online, *candidate, options());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  for (const std::string& arm : kArms) {
    const std::vector<ItemResult>& items = run->scenarios[0].arms.at(arm).items;
    ASSERT_EQ(items.size(), 5u);
    for (size_t i = 0; i < 3; ++i) {
      EXPECT_EQ(items[i].unfinished, "") << arm;
      EXPECT_EQ(items[i].unscored, "") << arm;
      EXPECT_EQ(items[i].generated_ids.size(), 8u) << arm;
      EXPECT_GT(items[i].n_ref_tokens, 0) << arm;
      EXPECT_GT(items[i].nll_sum, 0) << arm;
    }
    EXPECT_EQ(items[3].unfinished.rfind("error: ", 0), 0u) << arm << ": " << items[3].unfinished;
    EXPECT_NE(items[3].unfinished.find("exceeds the model length of 64"), std::string::npos) << items[3].unfinished;
    EXPECT_TRUE(items[3].generated_ids.empty());
    EXPECT_EQ(items[3].unscored, "cut: 4 of 10 tokens scored (max_model_len 64)") << arm;
    EXPECT_EQ(items[3].n_ref_tokens, 4) << arm;
    EXPECT_EQ(items[4].unfinished, "") << arm;
    EXPECT_EQ(items[4].generated_ids.size(), 8u) << arm;
    EXPECT_EQ(items[4].unscored, "cut: 24 of 30 tokens scored (max_model_len 64)") << arm;
    EXPECT_EQ(items[4].n_ref_tokens, 24) << arm;
    EXPECT_GT(items[4].nll_sum, 0) << arm;
  }
}

TEST_F(RunnerTest, ACancelledRowIsRecordedAsCancelledNotScoredZero) {
  auto online = std::make_unique<ScriptedArm>(load("a"));
  auto candidate = load("b");
  ASSERT_TRUE(candidate);
  const Suite s = suite(4);
  online->doomed = online->tokenizer().encode(s.scenarios[0].items[2].prompt, /*add_special_tokens=*/true);
  Result<RunResult> run = run_suite(s, *online, *candidate, options());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  for (const char* arm : {"online", "online_no_adapter"}) {
    const std::vector<ItemResult>& items = run->scenarios[0].arms.at(arm).items;
    EXPECT_EQ(items[2].unfinished, "cancelled") << arm;
    EXPECT_EQ(items[2].unscored, "cancelled") << arm;
    EXPECT_EQ(items[2].n_ref_tokens, 0) << arm;
    EXPECT_EQ(items[1].unfinished, "") << arm;
    EXPECT_EQ(items[1].unscored, "") << arm;
  }
  EXPECT_EQ(run->scenarios[0].arms.at("candidate").items[2].unfinished, "");  // the other base ran it
  EXPECT_EQ(run->scenarios[0].arms.at("candidate").items[2].unscored, "");
}

TEST_F(RunnerTest, ACancelledEvaluationStillEndsTheRun) {
  auto online = std::make_unique<ScriptedArm>(load("a"));
  auto candidate = load("b");
  ASSERT_TRUE(candidate);
  online->cancel_from = 4;
  Result<RunResult> run = run_suite(suite(4), *online, *candidate, options());
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().code(), StatusCode::kCancelled) << run.status().to_string();
}

// ---- in a server ---------------------------------------------------------------------

TEST_F(RunnerTest, ServingArmsReturnRefusedRowsAndStopOnTheCancelFlag) {
  auto gate = std::make_shared<ComputeGate>();
  Result<std::shared_ptr<ServingBase>> a = ServingBase::load({"a", model_dir("a")}, engine_options(), gate, true);
  Result<std::shared_ptr<ServingBase>> b = ServingBase::load({"b", model_dir("b")}, engine_options(), gate, false);
  ASSERT_TRUE(a.is_ok() && b.is_ok()) << a.status().to_string() << b.status().to_string();
  std::atomic<bool> cancel{false};
  auto online = serving_base_arm(*a, &cancel), candidate = serving_base_arm(*b, &cancel);

  std::vector<GenerationRequest> batch(2);
  batch[0].prompt_ids = online->tokenizer().encode("Once upon a time", true);
  batch[0].params.max_tokens = 4;
  batch[0].params.ignore_eos = true;
  batch[1] = batch[0];
  batch[1].prompt_ids.assign(kMaxModelLen, batch[0].prompt_ids.back());  // + 4 tokens: longer than the model
  Result<std::vector<GenerationResult>> out = online->run(batch);
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_EQ(out->at(0).output_ids.size(), 4u);
  EXPECT_EQ(out->at(1).finish_reason, FinishReason::kError);
  EXPECT_EQ(out->at(1).error_code, StatusCode::kInvalidArgument) << out->at(1).error;

  RunnerOptions o = options();
  o.progress = [&](int64_t done, int64_t) {
    if (done == 3) cancel.store(true);
  };
  Result<RunResult> run = run_suite(suite(4), *online, *candidate, o);
  ASSERT_FALSE(run.is_ok());
  EXPECT_EQ(run.status().code(), StatusCode::kCancelled) << run.status().to_string();
}

// ---- bytes and tokenizers ------------------------------------------------------------

TEST_F(RunnerTest, ReferenceBytesCountTheReferenceTextGivenOrDecoded) {
  auto online = load("a"), candidate = load("b");
  ASSERT_TRUE(online && candidate);
  Suite s = suite(2);
  // The same reference given as ids only: its bytes are those of its decoding.
  EvalItem ids_only = item("ids-only", "Once upon a time");
  const std::vector<int32_t> prompt = online->tokenizer().encode(ids_only.prompt, true);
  const std::vector<int32_t> whole = online->tokenizer().encode(ids_only.prompt + kReference, true);
  ASSERT_TRUE(std::equal(prompt.begin(), prompt.end(), whole.begin()));
  ids_only.reference_ids.assign(whole.begin() + static_cast<std::ptrdiff_t>(prompt.size()), whole.end());
  ids_only.reference = "";
  ASSERT_EQ(continuation_text(online->tokenizer(), ids_only.reference_ids), kReference);
  s.scenarios[0].items.push_back(ids_only);

  Result<RunResult> run = run_suite(s, *online, *candidate, options());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  for (const std::string& arm : kArms) {
    for (const ItemResult& it : run->scenarios[0].arms.at(arm).items) {
      EXPECT_EQ(it.reference_bytes, 17) << arm << " " << it.id;
      EXPECT_EQ(it.unscored, "") << arm << " " << it.id;
    }
  }
}

TEST_F(RunnerTest, TokenizerShasAreEqualForASharedTokenizerAndDifferOtherwise) {
  auto a = load("a"), b = load("b"), c = load("c");
  ASSERT_TRUE(a && b && c);
  Result<std::string> file_sha = sha256_file(model_dir("a") + "/tokenizer.json");
  ASSERT_TRUE(file_sha.is_ok());
  Result<RunResult> same = run_suite(suite(1), *a, *b, options());
  ASSERT_TRUE(same.is_ok()) << same.status().to_string();
  EXPECT_EQ(same->online_tokenizer_sha256, *file_sha);
  EXPECT_EQ(same->candidate_tokenizer_sha256, *file_sha);
  EXPECT_NE(a->sha256(), b->sha256());  // other weights all the same

  EXPECT_NE(c->tokenizer_sha256(), *file_sha);
  EXPECT_EQ(c->tokenizer_sha256().size(), 64u);
}

TEST_F(RunnerTest, GenericRowsRecordTheirBytesAndACutRowIsLeftOutOfTheMean) {
  auto online = load("a"), candidate = load("b");
  ASSERT_TRUE(online && candidate);
  Suite s = suite(1);
  const std::vector<int32_t> ids = online->tokenizer().encode("hello world", /*add_special_tokens=*/true);
  ASSERT_EQ(continuation_text(online->tokenizer(), {ids.begin() + 1, ids.end()}), " hello world");
  std::vector<int32_t> long_ids(100, ids.back());
  long_ids.front() = ids.front();
  s.generic = {GenericItem{"text", {}, "hello world"}, GenericItem{"ids", ids, ""}, GenericItem{"long", long_ids, ""}};

  Result<RunResult> run = run_suite(s, *online, *candidate, options());
  ASSERT_TRUE(run.is_ok()) << run.status().to_string();
  ASSERT_EQ(run->generic.size(), 2u);
  for (const GenericResult& g : run->generic) {
    EXPECT_EQ(g.row_bytes[0], 11) << g.arm;  // the text as given
    EXPECT_EQ(g.row_bytes[1], 12) << g.arm;  // " hello world": what the ids after BOS decode to
    EXPECT_EQ(g.row_tokens[2], kMaxModelLen - 1) << g.arm;
    // The cut row's bytes are those of the 63 tokens scored.
    EXPECT_EQ(g.row_bytes[2], 63 * static_cast<int64_t>(continuation_text(online->tokenizer(), {ids.back()}).size()));
    EXPECT_EQ(g.row_unscored, (std::vector<std::string>{"", "", "cut: 63 of 99 tokens scored (max_model_len 64)"}));
    const double full = (g.row_nll_sum[0] + g.row_nll_sum[1]) / static_cast<double>(g.row_tokens[0] + g.row_tokens[1]);
    EXPECT_DOUBLE_EQ(g.nll_mean, full) << g.arm;
  }
}

// ---- latency repeats -----------------------------------------------------------------

TEST_F(RunnerTest, LatencyRepeatsTimeEachItemAgainAndKeepTheMedian) {
  auto online = std::make_unique<ScriptedArm>(load("a"));
  auto candidate = std::make_unique<ScriptedArm>(load("b"));
  // Three back-to-back repeats get 9, 1, 5 (or 1, 5, 9 right after the same
  // warm-up request): the first is never the median, 5.
  online->ttft_script = candidate->ttft_script = {9, 1, 5};
  RunnerOptions o = options();
  o.latency_repeats = 3;
  Result<RunResult> repeated = run_suite(suite(3), *online, *candidate, o);
  ASSERT_TRUE(repeated.is_ok()) << repeated.status().to_string();
  EXPECT_EQ(online->generations, 2 + 3 * 2 * 3);  // a warm-up per arm, then 3 items x 2 arms x 3 repeats
  EXPECT_EQ(candidate->generations, 2 + 3 * 2 * 3);

  auto plain_online = load("a"), plain_candidate = load("b");
  ASSERT_TRUE(plain_online && plain_candidate);
  Result<RunResult> once = run_suite(suite(3), *plain_online, *plain_candidate, options());
  ASSERT_TRUE(once.is_ok()) << once.status().to_string();
  for (const std::string& arm : kArms) {
    for (size_t i = 0; i < 3; ++i) {
      const ItemResult& it = repeated->scenarios[0].arms.at(arm).items[i];
      EXPECT_DOUBLE_EQ(it.ttft_ms, 5) << arm;
      EXPECT_DOUBLE_EQ(it.tpot_ms, 0.5) << arm;
      EXPECT_EQ(it.generated_ids, once->scenarios[0].arms.at(arm).items[i].generated_ids) << arm;
    }
  }

  o.latency_repeats = 0;
  Result<RunResult> refused = run_suite(suite(1), *plain_online, *plain_candidate, o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_EQ(refused.status().code(), StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace loragate::eval
