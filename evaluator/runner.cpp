#include "evaluator/runner.h"

#include <chrono>
#include <filesystem>
#include <numeric>

#include "evaluator/metrics.h"
#include "evaluator/runner_order.h"
#include "evaluator/runner_scoring.h"
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

double mean_of(const std::vector<double>& v) {
  return v.empty() ? 0.0 : std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}

Result<std::string> adapter_sha(const std::string& dir) {
  return sha256_file((std::filesystem::path(dir) / "adapter_model.safetensors").string());
}

int64_t now_unix_seconds() {
  return std::chrono::duration_cast<std::chrono::seconds>(std::chrono::system_clock::now().time_since_epoch())
      .count();
}

// An item's generation on one arm, timed `repeats` times back to back: the
// first result is the one scored, its latencies the medians over the
// repeats that finished, so one hiccup does not become the item's TTFT.
struct TimedGeneration {
  GenerationResult result;
  double ttft_ms = 0;
  double tpot_ms = 0;
};

Result<TimedGeneration> generate_timed(ArmEngine& engine, const GenerationRequest& request, int32_t repeats) {
  TimedGeneration timed;
  std::vector<double> ttft, tpot;
  for (int32_t k = 0; k < repeats; ++k) {
    LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> out, engine.run({request}));
    GenerationResult& g = out.front();
    const bool finished = unfinished_reason(g).empty();
    if (finished) {
      ttft.push_back(g.ttft_ms);
      tpot.push_back(mean_of(g.itl_ms));
    }
    if (k == 0) {
      timed.result = std::move(g);
      if (!finished) break;  // nothing to time: the row is recorded as unfinished
    }
  }
  timed.ttft_ms = percentile(ttft, 50);
  timed.tpot_ms = percentile(tpot, 50);
  return timed;
}

}  // namespace

Result<RunResult> run_suite(const Suite& suite, ArmEngine& online, ArmEngine& candidate, const RunnerOptions& options) {
  RunResult run;
  if (options.latency_repeats < 1) {
    return Status::invalid_argument("latency_repeats must be 1 or more, got " + std::to_string(options.latency_repeats));
  }
  run.started_at = now_unix_seconds();
  run.online_base = online.name();
  run.online_sha256 = online.sha256();
  run.candidate_base = candidate.name();
  run.candidate_sha256 = candidate.sha256();
  run.online_tokenizer_sha256 = online.tokenizer_sha256();
  run.candidate_tokenizer_sha256 = candidate.tokenizer_sha256();
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
  const int64_t arms_per_item = options.base_only ? 2 : options.copied_adapter_arm ? 5 : 4;
  int64_t total = static_cast<int64_t>(suite.generic.empty() ? 0 : 2), done = 0;
  for (const ScenarioSpec& s : suite.scenarios) total += static_cast<int64_t>(s.items.size()) * arms_per_item + arms_per_item;
  auto tick = [&] {
    ++done;
    if (options.progress) options.progress(done, total);
  };

  for (const ScenarioSpec& spec : suite.scenarios) {
    const std::string in_scenario = "scenario '" + spec.name + "'";
    std::vector<ArmPlan> plans = {{"online_no_adapter", &online, "", ""},
                                  {"candidate_no_adapter", &candidate, "", ""}};
    AdapterChoice on;
    if (!options.base_only) {
      LG_ASSIGN_OR_RETURN(on, choose(spec.name, false));
      LG_ASSIGN_OR_RETURN(const AdapterChoice cand, choose(spec.name, true));
      LG_RETURN_IF_ERROR(online.add_adapter(on.name, on.dir).with_context(in_scenario));
      LG_RETURN_IF_ERROR(candidate.add_adapter(cand.name, cand.dir).with_context(in_scenario));
      // The adapter arms first: arm_order draws over arm indices, and runs stored before
      // base_only keep the orders they had.
      plans.insert(plans.begin(), {{"online", &online, on.name, on.dir}, {"candidate", &candidate, cand.name, cand.dir}});
    }
    if (options.copied_adapter_arm && !options.base_only) {
      const std::string copied = on.name + "@online";
      LG_RETURN_IF_ERROR(candidate.add_adapter(copied, on.dir).with_context(in_scenario));
      plans.push_back({"copied_adapter", &candidate, copied, on.dir});
    }

    ScenarioResult scenario;
    scenario.name = spec.name;
    std::vector<std::vector<EncodedItem>> encoded(plans.size());
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
        LG_ASSIGN_OR_RETURN(EncodedItem e, encode_item(spec.items[i], *plans[a].engine, where));
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
    // load into a slot) and of the workspace would otherwise land in item 0's
    // TTFT. Its result is not kept, so a refused one does not matter here.
    for (size_t a = 0; a < plans.size() && !spec.items.empty(); ++a) {
      LG_RETURN_IF_ERROR(plans[a].engine->run({request(a, 0)}).status());
    }
    // Greedy generation, one request at a time, each item's arms back to
    // back in an order drawn for the item (runner_order.h). A row that does
    // not finish is recorded as such and the run goes on; only a cancelled
    // evaluation (a status from run()) ends it.
    for (size_t i = 0; i < spec.items.size(); ++i) {
      const std::vector<size_t> order = arm_order(options.seed, spec.name, i, plans.size());
      for (size_t place = 0; place < order.size(); ++place) {
        const size_t a = order[place];
        LG_ASSIGN_OR_RETURN(TimedGeneration timed,
                            generate_timed(*plans[a].engine, request(a, i), options.latency_repeats));
        ItemResult& item = scenario.arms[plans[a].arm].items[i];
        item.id = spec.items[i].id;
        item.order = static_cast<int32_t>(place);
        item.unfinished = unfinished_reason(timed.result);
        item.generated_ids = std::move(timed.result.output_ids);
        item.ttft_ms = timed.ttft_ms;
        item.tpot_ms = timed.tpot_ms;
        score_item(spec.items[i], plans[a].engine->tokenizer(), &item);
        tick();
      }
    }
    for (size_t a = 0; a < plans.size(); ++a) {
      LG_RETURN_IF_ERROR(score_references(*plans[a].engine, plans[a].adapter_name, spec.items, encoded[a],
                                          scenario.arms[plans[a].arm].items)
                             .with_context("scenario '" + spec.name + "', arm " + plans[a].arm));
      tick();
    }
    for (auto& [name, arm] : scenario.arms) {
      const bool adapter_arm = name != "online_no_adapter" && name != "candidate_no_adapter";
      const std::vector<ItemResult>* against =
          adapter_arm ? &scenario.arms.at("online").items : &scenario.arms.at("online_no_adapter").items;
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
