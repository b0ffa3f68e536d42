// Prompt scoring (prompt_logprobs) on a synthetic model: a score is
// bit-identical alone or batched with generations and other scores on other
// adapters, chunked by the token budget or by max_logits_rows, and preempted;
// pure scores and score + generation; the scheduler's cap on scored rows;
// request validation.
#include <gtest/gtest.h>

#include <map>
#include <random>

#include "adapters/synth_adapter.h"
#include "engine/engine.h"
#include "model/synth_model.h"
#include "tests/test_util.h"

namespace loragate {
namespace {

constexpr int kNumAdapters = 3;

const std::string& synth_model_dir() {
  static const std::string dir = [] {
    const std::string root = testing::make_temp_dir("lg-score");
    const std::string model = root + "/model";
    EXPECT_TRUE(write_synth_model(model, SynthOptions{"tiny", 23, DType::kF32}).is_ok());
    auto config = ModelConfig::load(model);
    EXPECT_TRUE(config.is_ok());
    for (int i = 0; i < kNumAdapters; ++i) {
      SynthAdapterOptions o;
      o.rank = 4 << i;
      o.lora_alpha = 2.0 * static_cast<double>(o.rank);
      o.seed = 300 + i;
      o.b_std = 0.2;
      EXPECT_TRUE(write_synth_adapter(root + "/adapter" + std::to_string(i), *config, o).is_ok());
    }
    return model;
  }();
  return dir;
}

std::unique_ptr<Engine> make_score_engine(EngineOptions o) {
  o.max_lora_rank = 16;
  auto e = Engine::load(synth_model_dir(), o);
  EXPECT_TRUE(e.is_ok()) << e.status().to_string();
  if (!e.is_ok()) return nullptr;
  const std::string root = synth_model_dir() + "/..";
  for (int i = 0; i < kNumAdapters; ++i) {
    const std::string name = "adapter" + std::to_string(i);
    EXPECT_TRUE((*e)->adapters()->add(name, root + "/" + name).is_ok());
    // Loaded up front: an asynchronous load would make admission, and so
    // which sequences get preempted, depend on the machine's timing.
    EXPECT_TRUE((*e)->adapters()->load_now(name).is_ok());
  }
  return std::move(e).value();
}

std::vector<int32_t> random_prompt(std::mt19937& rng, int len) {
  std::uniform_int_distribution<int> token(3, 511);
  std::vector<int32_t> p = {1};
  for (int t = 1; t < len; ++t) p.push_back(token(rng));
  return p;
}

GenerationRequest score(std::vector<int32_t> prompt, int32_t top_n, int64_t from = 1, int32_t max_tokens = 0) {
  GenerationRequest r;
  r.prompt_ids = std::move(prompt);
  r.prompt_logprobs = top_n;
  r.score_from = from;
  r.params.temperature = 0.0f;
  r.params.max_tokens = max_tokens;
  r.params.ignore_eos = true;
  return r;
}

// Pure scores, scores that also generate and plain generations, on the base and every adapter.
std::vector<GenerationRequest> mixed_requests(int n, uint32_t seed) {
  std::mt19937 rng(seed);
  std::uniform_int_distribution<int> kind(0, 2), adapter(-1, kNumAdapters - 1), len(2, 70), top(0, 5), gen(1, 12);
  std::vector<GenerationRequest> out;
  for (int i = 0; i < n; ++i) {
    const int k = kind(rng);
    const int l = len(rng);
    GenerationRequest r = score(random_prompt(rng, l), k == 2 ? -1 : top(rng),
                                std::uniform_int_distribution<int>(1, l - 1)(rng), k == 0 ? 0 : gen(rng));
    const int a = adapter(rng);
    r.adapter = a < 0 ? "" : "adapter" + std::to_string(a);
    out.push_back(std::move(r));
  }
  return out;
}

void expect_same_scored_logprobs(const std::vector<TokenLogprobs>& got, const std::vector<TokenLogprobs>& want,
                          const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t k = 0; k < want.size(); ++k) {
    EXPECT_EQ(got[k].token, want[k].token) << what << " entry " << k;
    EXPECT_EQ(got[k].logprob, want[k].logprob) << what << " entry " << k;  // bit for bit
    EXPECT_EQ(got[k].rank, want[k].rank) << what << " entry " << k;
    EXPECT_EQ(got[k].top, want[k].top) << what << " entry " << k;
  }
}

std::vector<GenerationResult> run_alone(const std::vector<GenerationRequest>& requests) {
  auto engine = make_score_engine({});
  std::vector<GenerationResult> out;
  for (const GenerationRequest& r : requests) {
    auto got = engine->generate({r});
    EXPECT_TRUE(got.is_ok()) << got.status().to_string();
    out.push_back(std::move(got->front()));
  }
  return out;
}

// Requests arrive a few at a time before each step.
std::vector<GenerationResult> run_with_arrivals(Engine& engine, const std::vector<GenerationRequest>& requests) {
  std::map<int64_t, size_t> index_of;
  std::vector<GenerationResult> out(requests.size());
  std::mt19937 arrivals(5);
  size_t next = 0;
  while (next < requests.size() || engine.has_unfinished()) {
    for (int k = std::uniform_int_distribution<int>(0, 3)(arrivals); k > 0 && next < requests.size(); --k, ++next) {
      auto id = engine.add_request(requests[next]);
      EXPECT_TRUE(id.is_ok()) << id.status().to_string();
      index_of[*id] = next;
    }
    EXPECT_TRUE(engine.step().is_ok());
    for (GenerationResult& r : engine.take_finished()) out[index_of[r.id]] = std::move(r);
  }
  return out;
}

void expect_same_results(const std::vector<GenerationResult>& got, const std::vector<GenerationResult>& alone,
                         const std::vector<GenerationRequest>& requests) {
  for (size_t i = 0; i < requests.size(); ++i) {
    const std::string what = "request " + std::to_string(i) + " adapter '" + requests[i].adapter + "'";
    EXPECT_EQ(got[i].finish_reason, FinishReason::kLength) << what << " " << got[i].error;
    EXPECT_EQ(got[i].output_ids, alone[i].output_ids) << what;
    expect_same_scored_logprobs(got[i].prompt_logprobs, alone[i].prompt_logprobs, what);
  }
}

TEST(ScoreBatchingTest, MixedBatchChunkedAndPreemptedEqualsAlone) {
  const std::vector<GenerationRequest> requests = mixed_requests(30, 17);
  const std::vector<GenerationResult> alone = run_alone(requests);
  for (size_t i = 0; i < requests.size(); ++i) {
    const GenerationRequest& r = requests[i];
    const size_t scored = r.prompt_logprobs < 0 ? 0 : r.prompt_ids.size() - static_cast<size_t>(r.score_from);
    ASSERT_EQ(alone[i].prompt_logprobs.size(), scored) << "request " << i;
    EXPECT_EQ(alone[i].output_ids.size(), static_cast<size_t>(r.params.max_tokens)) << "request " << i;
  }

  EngineOptions o;
  o.max_num_batched_tokens = 20;  // chunked prefill
  o.max_logits_rows = 6;          // and chunks cut by scored rows
  o.kv_block_size = 4;
  o.kv_num_blocks = 40;           // tight: forces preemption
  o.max_loras = 2;                // three adapters rotate through two slots
  auto engine = make_score_engine(o);
  const std::vector<GenerationResult> batched = run_with_arrivals(*engine, requests);
  expect_same_results(batched, alone, requests);
  EXPECT_GT(engine->stats().preemptions, 0);
  bool preempted_score = false;
  for (size_t i = 0; i < requests.size(); ++i) {
    preempted_score |= requests[i].prompt_logprobs >= 0 && batched[i].preemptions > 0;
  }
  EXPECT_TRUE(preempted_score) << "no scoring request was preempted: the pool is not tight enough";

  EngineOptions whole;
  whole.max_num_batched_tokens = 4096;
  auto big = make_score_engine(whole);
  auto all = big->generate(requests);
  ASSERT_TRUE(all.is_ok()) << all.status().to_string();
  expect_same_results(*all, alone, requests);
}

// A score preempted halfway is recomputed from position 0 and still records
// each position once: the recomputation passes over what was scored.
TEST(ScoreBatchingTest, ScorePreemptedMidwayRecordsEachPositionOnce) {
  std::mt19937 rng(8);
  GenerationRequest gen = score(random_prompt(rng, 10), -1, 1, 40);
  GenerationRequest long_score = score(random_prompt(rng, 60), 2);
  const std::vector<GenerationResult> alone = run_alone({gen, long_score});

  EngineOptions o;
  o.kv_block_size = 4;
  o.kv_num_blocks = 20;  // 13 blocks for the generation, 15 for the score
  o.max_num_batched_tokens = 8;
  o.max_logits_rows = 4;
  auto engine = make_score_engine(o);
  auto out = engine->generate({gen, long_score});
  ASSERT_TRUE(out.is_ok()) << out.status().to_string();
  EXPECT_GT((*out)[1].preemptions, 0) << "the score was meant to be preempted";
  expect_same_results(*out, alone, {gen, long_score});
}

TEST(ScoreBatchingTest, PureScoreEndsWithLengthAndNoOutput) {
  std::mt19937 rng(2);
  const std::vector<int32_t> prompt = random_prompt(rng, 30);
  auto engine = make_score_engine({});
  auto out = engine->generate({score(prompt, 3)});
  ASSERT_TRUE(out.is_ok());
  const GenerationResult& r = out->front();
  EXPECT_EQ(r.finish_reason, FinishReason::kLength);
  EXPECT_TRUE(r.output_ids.empty());
  ASSERT_EQ(r.prompt_logprobs.size(), prompt.size() - 1);
  for (size_t k = 0; k < r.prompt_logprobs.size(); ++k) {
    const TokenLogprobs& lp = r.prompt_logprobs[k];
    EXPECT_EQ(lp.token, prompt[k + 1]);
    EXPECT_LE(lp.logprob, 0.0f);
    ASSERT_EQ(lp.top.size(), 3u);
    EXPECT_GE(lp.top[0].second, lp.logprob) << "the most likely token is at least as likely";
  }
  EXPECT_EQ(engine->stats().generated_tokens, 0);
  EXPECT_EQ(engine->stats().kv_blocks_used, 0);

  GenerationRequest nothing = score(prompt, -1);  // max_tokens 0 without scoring: retired at once
  auto none = engine->generate({nothing});
  ASSERT_TRUE(none.is_ok());
  EXPECT_EQ(none->front().finish_reason, FinishReason::kLength);
  EXPECT_TRUE(none->front().prompt_logprobs.empty());
}

TEST(ScoreBatchingTest, ScoreWithGenerationEqualsEachAlone) {
  std::mt19937 rng(4);
  const std::vector<int32_t> prompt = random_prompt(rng, 25);
  auto engine = make_score_engine({});
  std::vector<float> first_logprob;  // of each adapter: they must differ, or the adapters prove nothing
  for (const std::string adapter : {"", "adapter1"}) {
    GenerationRequest both = score(prompt, 4, 1, 10);
    GenerationRequest only_score = score(prompt, 4);
    GenerationRequest only_gen = score(prompt, -1, 1, 10);
    both.adapter = only_score.adapter = only_gen.adapter = adapter;
    auto out = engine->generate({both, only_score, only_gen});
    ASSERT_TRUE(out.is_ok());
    expect_same_scored_logprobs((*out)[0].prompt_logprobs, (*out)[1].prompt_logprobs, "adapter '" + adapter + "'");
    EXPECT_EQ((*out)[0].output_ids, (*out)[2].output_ids);
    EXPECT_EQ((*out)[0].output_ids.size(), 10u);
    EXPECT_TRUE((*out)[2].prompt_logprobs.empty());
    first_logprob.push_back((*out)[1].prompt_logprobs.front().logprob);
  }
  EXPECT_NE(first_logprob[0], first_logprob[1]);
}

TEST(ScoreBatchingTest, ScoreFromGivesTheSuffix) {
  std::mt19937 rng(6);
  const std::vector<int32_t> prompt = random_prompt(rng, 40);
  auto engine = make_score_engine({});
  auto out = engine->generate({score(prompt, 2, 1), score(prompt, 2, 29), score(prompt, 2, 39)});
  ASSERT_TRUE(out.is_ok());
  const auto& full = (*out)[0].prompt_logprobs;
  expect_same_scored_logprobs((*out)[1].prompt_logprobs, {full.begin() + 28, full.end()}, "score_from 29");
  expect_same_scored_logprobs((*out)[2].prompt_logprobs, {full.end() - 1, full.end()}, "score_from 39");
}

TEST(ScoreBatchingTest, MaxLogitsRowsSplitsALongScoreIntoSteps) {
  std::mt19937 rng(9);
  const std::vector<int32_t> prompt = random_prompt(rng, 61);
  EngineOptions o;
  o.max_logits_rows = 5;
  auto engine = make_score_engine(o);
  auto out = engine->generate({score(prompt, 1)});
  ASSERT_TRUE(out.is_ok());
  EXPECT_EQ(engine->stats().steps, 12) << "60 scored rows, 5 a step";
  auto reference = make_score_engine({})->generate({score(prompt, 1)});
  expect_same_scored_logprobs(out->front().prompt_logprobs, reference->front().prompt_logprobs, "max_logits_rows 5");
}

// The scheduler's view: scored rows are capped per step across sequences,
// unscored positions before score_from are free, decodes are never held back.
TEST(ScoreBatchingTest, SchedulerCapsScoredRowsPerStep) {
  BlockManager blocks(64, 16);
  Scheduler scheduler(SchedulerOptions{512, 8, 5}, &blocks, nullptr);
  const Clock::time_point now = Clock::now();
  SamplingParams pure;
  pure.max_tokens = 0;
  SamplingParams gen;
  gen.max_tokens = 4;
  const std::vector<int32_t> prompt(30, 3);
  Sequence from_start(1, prompt, pure, 0, 1, 0, nullptr, now);
  Sequence late(2, prompt, pure, 0, 20, 0, nullptr, now);
  Sequence plain(3, prompt, gen, -1, 1, 0, nullptr, now);
  for (Sequence* s : {&from_start, &late, &plain}) scheduler.add(s);

  auto chunks_of = [](const std::vector<ScheduledChunk>& planned) {
    std::map<int64_t, int64_t> m;
    for (const ScheduledChunk& c : planned) m[c.seq->id()] = c.num_tokens;
    return m;
  };
  const std::vector<float> logits(8, 0.0f);
  // Runs the planned chunks as the engine does: scores their scored rows, samples at the end.
  auto run = [&](const std::vector<ScheduledChunk>& planned) {
    for (const ScheduledChunk& c : planned) {
      const int64_t rows = c.seq->scored_positions(c.num_tokens);
      c.seq->advance_computed(c.num_tokens);
      for (int64_t r = 0; r < rows; ++r) c.seq->score_next_prompt_token(logits.data(), 8);
      if (c.seq->num_uncomputed() == 0 && c.seq->params().max_tokens > 0) c.seq->append_token(3, {}, now);
    }
    scheduler.release_finished();
  };

  EXPECT_EQ(late.logits_positions(30).begin, 19) << "token 20 is scored with the logits at position 19";
  EXPECT_EQ(late.logits_positions(30).count, 10);
  std::vector<ScheduledChunk> step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{1, 5}, {2, 19}, {3, 30}}))
      << "all 5 rows go to the first score; positions before score_from - 1 cost none";
  run(step);
  EXPECT_EQ(from_start.prompt_logprobs().size(), 5u);
  EXPECT_EQ(from_start.logits_positions(5).begin, 5);
  EXPECT_EQ(from_start.logits_positions(5).count, 5);
  EXPECT_EQ(plain.logits_positions(1).begin, 30) << "a decode wants its last position only";
  EXPECT_EQ(plain.logits_positions(1).count, 1);

  step = scheduler.schedule();
  EXPECT_EQ(chunks_of(step), (std::map<int64_t, int64_t>{{1, 5}, {3, 1}})) << "no rows left for the second score";
  run(step);
  while (!from_start.finished()) run(scheduler.schedule());
  EXPECT_EQ(from_start.prompt_logprobs().size(), 29u) << "a pure score ends once its last token is scored";
  EXPECT_EQ(late.prompt_logprobs().size(), 1u) << "the row the first score left in its last step";
  EXPECT_TRUE(plain.finished());
}

TEST(ScoreBatchingTest, RefusesBadScoreRequestsNamingTheField) {
  auto engine = make_score_engine({});
  std::mt19937 rng(1);
  const std::vector<int32_t> prompt = random_prompt(rng, 10);
  auto message = [&](const GenerationRequest& r) { return engine->validate_request(r).message(); };
  for (int32_t bad : {-2, 21}) {
    EXPECT_NE(message(score(prompt, bad)).find("prompt_logprobs"), std::string::npos) << bad;
  }
  for (int64_t bad : {0, 10, -1}) {
    const std::string m = message(score(prompt, 0, bad));
    EXPECT_NE(m.find("score_from"), std::string::npos) << bad << ": " << m;
  }
  EXPECT_NE(message(score({1}, 0)).find("nothing to score"), std::string::npos);
  EXPECT_TRUE(engine->validate_request(score(prompt, 20, 9)).is_ok());
  GenerationRequest unscored = score({1}, -1, 0, 4);  // score_from is not looked at without scoring
  EXPECT_TRUE(engine->validate_request(unscored).is_ok());

  EngineOptions o;
  o.max_logits_rows = 0;
  auto refused = Engine::load(synth_model_dir(), o);
  ASSERT_FALSE(refused.is_ok());
  EXPECT_NE(refused.status().message().find("max_logits_rows"), std::string::npos);
}

}  // namespace
}  // namespace loragate
