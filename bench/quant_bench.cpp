#include "bench/quant_bench.h"

#include <cstdio>
#include <memory>

#include "bench/bench_util.h"
#include "engine/cpu_model_runner.h"
#include "engine/engine.h"
#include "engine/logit_agreement.h"
#include "model/model_dir.h"

namespace loragate::bench {

Status run_quant_bench(const QuantBenchOptions& o) {
  EngineOptions eo;
  eo.max_num_seqs = o.prompts;
  eo.max_num_batched_tokens = static_cast<int64_t>(o.prompts) * o.prompt_len;
  eo.max_loras = 0;
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> model, ModelDir::open(o.model_dir));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> f32, Engine::load(model, eo));
  const int64_t vocab = f32->config().vocab_size;

  std::vector<GenerationRequest> requests;
  for (int i = 0; i < o.prompts; ++i) requests.push_back(greedy_request(o.prompt_len, o.new_tokens, vocab, i + 1));
  LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> results, f32->generate(requests));
  std::vector<std::vector<int32_t>> sequences;
  std::vector<int64_t> prompt_lens;
  for (size_t i = 0; i < results.size(); ++i) {
    sequences.push_back(requests[i].prompt_ids);
    sequences.back().insert(sequences.back().end(), results[i].output_ids.begin(), results[i].output_ids.end());
    prompt_lens.push_back(o.prompt_len);
  }

  std::printf("loragate quantisation accuracy: model %s, %d prompts of %d tokens, %d greedy f32 tokens each, "
              "teacher-forced\n\n",
              o.model_dir.c_str(), o.prompts, o.prompt_len, o.new_tokens);
  std::printf("%-13s %12s %16s %14s %14s\n", "dtype", "weights MiB", "greedy agree", "max |dlogit|", "mean |dlogit|");
  std::printf("%-13s %12.1f %16s %14s %14s\n", "f32", f32->runner().weights_bytes() / 1048576.0, "(reference)", "",
              "");
  for (const std::string& name : o.dtypes) {
    LG_ASSIGN_OR_RETURN(const WeightType type, parse_weight_type(name));
    LG_ASSIGN_OR_RETURN(std::unique_ptr<LlamaModel> q,
                        LlamaModel::load(*model, type, nullptr, o.outlier_threshold));
    LG_ASSIGN_OR_RETURN(LogitAgreement a, compare_logits(*cpu_model(f32->runner()), *q, sequences, prompt_lens));
    std::printf("%-13s %12.1f %15.1f%% %14.4f %14.4f\n", name.c_str(), q->weights().bytes() / 1048576.0,
                100.0 * a.agreement(), a.max_abs_error, a.mean_abs_error);
    const std::vector<cpu::OutlierCounts> counts = q->outlier_counts();
    for (size_t l = 0; l < counts.size(); ++l) {
      const double share = counts[l].columns > 0 ? static_cast<double>(counts[l].outliers) / counts[l].columns : 0;
      std::printf("    %s: %.3f%% of activation columns above %.1f ran in f32\n",
                  l + 1 == counts.size() ? "lm_head" : ("layer " + std::to_string(l)).c_str(), 100.0 * share,
                  o.outlier_threshold);
    }
  }
  return Status::ok();
}

}  // namespace loragate::bench
