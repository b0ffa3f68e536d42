#include "evaluator/runner.h"

#include <chrono>
#include <cmath>
#include <filesystem>
#include <numeric>

#include "evaluator/metrics.h"
#include "evaluator/suite.h"
#include "common/sha256.h"

namespace loragate::eval {
namespace {

// One arm of a scenario: which engine, which adapter ("" = none).
struct ArmPlan {
  std::string arm;
  ArmEngine* engine;
  std::string adapter_name;
  std::string adapter_dir;
};

// The ids an item's prompt and reference get on `engine` (bases may tokenise differently).
struct Encoded {
  std::vector<int32_t> prompt, reference;
};

Result<Encoded> encode_item(const EvalItem& item, const ArmEngine& engine, const std::string& where) {
  Encoded e;
  const Tokenizer& tok = engine.tokenizer();
  std::string prompt_text = item.prompt;
  if (!item.prompt_ids.empty()) {
    e.prompt = item.prompt_ids;
  } else if (!item.messages.is_null()) {
    LG_ASSIGN_OR_RETURN(prompt_text, engine.chat_template().render(item.messages, /*add_generation_prompt=*/true));
    e.prompt = tok.encode(prompt_text, /*add_special_tokens=*/false);
  } else {
    e.prompt = tok.encode(item.prompt, /*add_special_tokens=*/true);
  }
  if (!item.reference_ids.empty()) {
    e.reference = item.reference_ids;
    return e;
  }
  // reference_ids = encode(prompt + reference) minus the prompt's ids.
  const std::vector<int32_t> whole =
      item.messages.is_null() ? tok.encode(item.prompt + item.reference, /*add_special_tokens=*/true)
                              : tok.encode(prompt_text + item.reference, /*add_special_tokens=*/false);
  if (whole.size() < e.prompt.size() || !std::equal(e.prompt.begin(), e.prompt.end(), whole.begin())) {
    return Status::invalid_argument(where + ": encode(prompt + reference) does not start with encode(prompt) on base '" +
                                    engine.name() + "'; give reference_ids");
  }
  e.reference.assign(whole.begin() + static_cast<std::ptrdiff_t>(e.prompt.size()), whole.end());
  return e;
}

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Result<std::string> adapter_sha(const std::string& dir) {
  return sha256_file((std::filesystem::path(dir) / "adapter_model.safetensors").string());
}

int64_t unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// Teacher-forced NLL of every reference: one batch per arm.
Status score_references(const ArmPlan& plan, const std::vector<Encoded>& encoded, std::vector<ItemResult>& items) {
  std::vector<GenerationRequest> requests;
  for (const Encoded& e : encoded) {
    GenerationRequest r;
    r.prompt_ids = e.prompt;
    r.prompt_ids.insert(r.prompt_ids.end(), e.reference.begin(), e.reference.end());
    r.params.max_tokens = 0;
    r.params.temperature = 0;
    r.prompt_logprobs = 0;
    r.score_from = static_cast<int64_t>(e.prompt.size());
    r.adapter = plan.adapter_name;
    requests.push_back(std::move(r));
  }
  LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> scored, plan.engine->run(std::move(requests)));
  for (size_t i = 0; i < items.size(); ++i) {
    if (scored[i].finish_reason == FinishReason::kError) return Status::internal("scoring failed: " + scored[i].error);
    items[i].nll_sum = 0;
    for (const TokenLogprobs& lp : scored[i].prompt_logprobs) items[i].nll_sum -= lp.logprob;
    items[i].n_ref_tokens = static_cast<int64_t>(scored[i].prompt_logprobs.size());
  }
  return Status::ok();
}

Result<GenericResult> score_generic(const std::string& arm, ArmEngine& engine, const std::vector<GenericItem>& rows) {
  std::vector<GenerationRequest> requests;
  for (const GenericItem& row : rows) {
    GenerationRequest r;
    r.prompt_ids = row.ids.empty() ? engine.tokenizer().encode(row.text, /*add_special_tokens=*/true) : row.ids;
    if (r.prompt_ids.size() < 2) return Status::invalid_argument("generic row '" + row.id + "' has fewer than 2 tokens");
    r.params.max_tokens = 0;
    r.prompt_logprobs = 0;
    r.score_from = 1;
    requests.push_back(std::move(r));
  }
  LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> scored, engine.run(std::move(requests)));
  GenericResult g;
  g.arm = arm;
  double nll = 0;
  int64_t tokens = 0;
  for (const GenerationResult& r : scored) {
    double row = 0;
    for (const TokenLogprobs& lp : r.prompt_logprobs) row -= lp.logprob;
    g.row_nll_sum.push_back(row);
    g.row_tokens.push_back(static_cast<int64_t>(r.prompt_logprobs.size()));
    nll += row;
    tokens += static_cast<int64_t>(r.prompt_logprobs.size());
  }
  g.nll_mean = tokens > 0 ? nll / static_cast<double>(tokens) : 0;
  g.perplexity = std::exp(g.nll_mean);
  return g;
}

}  // namespace

Result<RunResult> run_suite(const Suite& suite, ArmEngine& online, ArmEngine& candidate, const RunnerOptions& options) {
  RunResult run;
  run.started_at = unix_seconds();
  run.online_base = online.name();
  run.online_sha256 = online.sha256();
  run.candidate_base = candidate.name();
  run.candidate_sha256 = candidate.sha256();
  run.suite_path = suite.path;
  run.suite_text = suite.text;
  run.suite_sha256 = suite_sha256(suite);
  run.seed = options.seed;

  // Offline: the scenario's folder in each adapters directory, under the scenario's name.
  auto choose = [&](const std::string& scenario, bool cand) -> Result<AdapterChoice> {
    if (options.adapter_for) return options.adapter_for(scenario, cand);
    const std::string& root = cand ? options.candidate_adapters : options.online_adapters;
    return AdapterChoice{scenario, (std::filesystem::path(root) / scenario).string()};
  };
  const int64_t arms_per_item = options.copied_adapter_arm ? 5 : 4;
  int64_t total = static_cast<int64_t>(suite.generic.empty() ? 0 : 2), done = 0;
  for (const ScenarioSpec& s : suite.scenarios) total += static_cast<int64_t>(s.items.size()) * arms_per_item + arms_per_item;
  auto tick = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };

  for (const ScenarioSpec& spec : suite.scenarios) {
    const std::string in_scenario = "scenario '" + spec.name + "'";
    LG_ASSIGN_OR_RETURN(const AdapterChoice on, choose(spec.name, false));
    LG_ASSIGN_OR_RETURN(const AdapterChoice cand, choose(spec.name, true));
    LG_RETURN_IF_ERROR(online.add_adapter(on.name, on.dir).with_context(in_scenario));
    LG_RETURN_IF_ERROR(candidate.add_adapter(cand.name, cand.dir).with_context(in_scenario));
    std::vector<ArmPlan> plans = {{"online", &online, on.name, on.dir},
                                  {"candidate", &candidate, cand.name, cand.dir},
                                  {"online_no_adapter", &online, "", ""},
                                  {"candidate_no_adapter", &candidate, "", ""}};
    if (options.copied_adapter_arm) {
      const std::string copied = on.name + "@online";
      LG_RETURN_IF_ERROR(candidate.add_adapter(copied, on.dir).with_context(in_scenario));
      plans.push_back({"copied_adapter", &candidate, copied, on.dir});
    }

    ScenarioResult scenario;
    scenario.name = spec.name;
    std::vector<std::vector<Encoded>> encoded(plans.size());
    for (size_t a = 0; a < plans.size(); ++a) {
      ArmResult& arm = scenario.arms[plans[a].arm];
      arm.arm = plans[a].arm;
      arm.base = plans[a].engine->name();
      arm.base_sha256 = plans[a].engine->sha256();
      arm.adapter = plans[a].adapter_dir;
      if (!arm.adapter.empty()) {
        LG_ASSIGN_OR_RETURN(arm.adapter_sha256, adapter_sha(arm.adapter));
      }
      for (size_t i = 0; i < spec.items.size(); ++i) {
        const std::string where = spec.eval_path + ": item '" + spec.items[i].id + "'";
        LG_ASSIGN_OR_RETURN(Encoded e, encode_item(spec.items[i], *plans[a].engine, where));
        encoded[a].push_back(std::move(e));
      }
      arm.items.resize(spec.items.size());
    }

    auto request = [&](size_t a, size_t i) {
      GenerationRequest r;
      r.prompt_ids = encoded[a][i].prompt;
      r.params.temperature = 0;
      r.params.max_tokens = spec.max_tokens;
      r.params.ignore_eos = spec.stop.empty();  // as the reference: a fixed number of tokens, cut later
      r.params.stop = spec.stop;
      r.adapter = plans[a].adapter_name;
      return r;
    };
    // One untimed request per arm first: the first use of an adapter (its
    // load into a slot) and of the workspace would otherwise land in item 0's TTFT.
    for (size_t a = 0; a < plans.size() && !spec.items.empty(); ++a) {
      LG_RETURN_IF_ERROR(plans[a].engine->run({request(a, 0)}).status());
    }
    // Greedy generation, one request at a time, arms interleaved item by item.
    for (size_t i = 0; i < spec.items.size(); ++i) {
      for (size_t a = 0; a < plans.size(); ++a) {
        LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> out, plans[a].engine->run({request(a, i)}));
        const GenerationResult& g = out.front();
        if (g.finish_reason == FinishReason::kError || g.finish_reason == FinishReason::kCancelled) {
          return Status::internal(spec.eval_path + ": item '" + spec.items[i].id + "' on arm " + plans[a].arm +
                                  " failed: " + g.error);
        }
        ItemResult& item = scenario.arms[plans[a].arm].items[i];
        item.id = spec.items[i].id;
        item.generated_ids = g.output_ids;
        item.ttft_ms = g.ttft_ms;
        item.tpot_ms = mean_of(g.itl_ms);
        score_item(spec.items[i], plans[a].engine->tokenizer(), &item);
        tick();
      }
    }
    for (size_t a = 0; a < plans.size(); ++a) {
      LG_RETURN_IF_ERROR(score_references(plans[a], encoded[a], scenario.arms[plans[a].arm].items)
                             .with_context("scenario '" + spec.name + "', arm " + plans[a].arm));
      tick();
    }
    const std::vector<ItemResult>& reference = scenario.arms.at("online").items;
    for (auto& [name, arm] : scenario.arms) {
      const bool adapter_arm = name != "online_no_adapter" && name != "candidate_no_adapter";
      const std::vector<ItemResult>* against =
          adapter_arm ? &reference : &scenario.arms.at("online_no_adapter").items;
      arm.metrics = aggregate(arm.items, name == "online" || name == "online_no_adapter" ? nullptr : against);
    }
    run.scenarios.push_back(std::move(scenario));
  }

  if (!suite.generic.empty()) {
    for (auto [arm, engine] : {std::pair<const char*, ArmEngine*>{"online", &online}, {"candidate", &candidate}}) {
      LG_ASSIGN_OR_RETURN(GenericResult g, score_generic(arm, *engine, suite.generic));
      run.generic.push_back(std::move(g));
      tick();
    }
  }
  return run;
}

}  // namespace loragate::eval
