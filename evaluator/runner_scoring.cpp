#include "evaluator/runner_scoring.h"

#include <algorithm>
#include <cmath>

#include "evaluator/metrics.h"

namespace loragate::eval {
namespace {

// A pure score of prompt_ids[score_from:] (no token generated).
GenerationRequest score_request(std::vector<int32_t> ids, int64_t score_from, const std::string& adapter) {
  GenerationRequest r;
  r.prompt_ids = std::move(ids);
  r.params.max_tokens = 0;
  r.params.temperature = 0;
  r.prompt_logprobs = 0;
  r.score_from = score_from;
  r.adapter = adapter;
  return r;
}

double nll_of(const GenerationResult& scored) {
  double nll = 0;
  for (const TokenLogprobs& lp : scored.prompt_logprobs) nll -= lp.logprob;
  return nll;
}

std::string cut_reason(size_t scored, size_t wanted, int64_t max_model_len) {
  return "cut: " + std::to_string(scored) + " of " + std::to_string(wanted) + " tokens scored (max_model_len " +
         std::to_string(max_model_len) + ")";
}

}  // namespace

std::string unfinished_reason(const GenerationResult& result) {
  if (result.finish_reason == FinishReason::kError) return "error: " + result.error;
  if (result.finish_reason == FinishReason::kCancelled) return "cancelled";
  return "";
}

Result<EncodedItem> encode_item(const EvalItem& item, const ArmEngine& engine, const std::string& where) {
  EncodedItem e;
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

int64_t decoded_bytes(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  return static_cast<int64_t>(continuation_text(tokenizer, ids).size());
}

Status score_references(ArmEngine& engine, const std::string& adapter, const std::vector<EvalItem>& specs,
                        const std::vector<EncodedItem>& encoded, std::vector<ItemResult>& items) {
  const int64_t max_len = engine.max_model_len();
  // What of each reference fits beside its prompt; items with nothing to score send no request.
  std::vector<size_t> fits(encoded.size()), sent;
  std::vector<GenerationRequest> requests;
  for (size_t i = 0; i < encoded.size(); ++i) {
    const EncodedItem& e = encoded[i];
    const int64_t room = max_len - static_cast<int64_t>(e.prompt.size());
    fits[i] = static_cast<size_t>(std::clamp<int64_t>(room, 0, static_cast<int64_t>(e.reference.size())));
    if (fits[i] == 0 || e.prompt.empty()) continue;
    std::vector<int32_t> ids = e.prompt;
    ids.insert(ids.end(), e.reference.begin(), e.reference.begin() + static_cast<std::ptrdiff_t>(fits[i]));
    requests.push_back(score_request(std::move(ids), static_cast<int64_t>(e.prompt.size()), adapter));
    sent.push_back(i);
  }
  LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> scored, engine.run(std::move(requests)));

  for (size_t i = 0; i < items.size(); ++i) {
    const std::vector<int32_t>& reference = encoded[i].reference;
    items[i].nll_sum = 0;
    items[i].n_ref_tokens = 0;
    items[i].reference_bytes = specs[i].reference.empty() ? decoded_bytes(engine.tokenizer(), reference)
                                                          : static_cast<int64_t>(specs[i].reference.size());
    if (reference.empty()) items[i].unscored = "the reference has no tokens";
    if (encoded[i].prompt.empty()) items[i].unscored = "the prompt has no tokens";
    if (!items[i].unscored.empty()) continue;
    if (fits[i] == 0) {
      items[i].unscored = cut_reason(0, reference.size(), max_len);
      items[i].reference_bytes = 0;  // nothing of it was scored
    }
  }
  for (size_t k = 0; k < sent.size(); ++k) {
    const size_t i = sent[k];
    ItemResult& item = items[i];
    const std::vector<int32_t>& reference = encoded[i].reference;
    item.unscored = unfinished_reason(scored[k]);
    if (!item.unscored.empty()) continue;
    item.nll_sum = nll_of(scored[k]);
    item.n_ref_tokens = static_cast<int64_t>(scored[k].prompt_logprobs.size());
    if (scored[k].prompt_logprobs.size() < reference.size()) {
      item.unscored = cut_reason(scored[k].prompt_logprobs.size(), reference.size(), max_len);
      // The bytes of what was scored, so a per-byte figure of the part stays a true one.
      item.reference_bytes = decoded_bytes(
          engine.tokenizer(),
          std::vector<int32_t>(reference.begin(), reference.begin() + static_cast<std::ptrdiff_t>(item.n_ref_tokens)));
    }
  }
  return Status::ok();
}

Result<GenericResult> score_generic(const std::string& arm, ArmEngine& engine, const std::vector<GenericItem>& rows) {
  const int64_t max_len = engine.max_model_len();
  std::vector<std::vector<int32_t>> row_ids;
  std::vector<GenerationRequest> requests;
  GenericResult g;
  g.arm = arm;
  for (const GenericItem& row : rows) {
    std::vector<int32_t> ids = row.ids.empty() ? engine.tokenizer().encode(row.text, /*add_special_tokens=*/true) : row.ids;
    if (ids.size() < 2) return Status::invalid_argument("generic row '" + row.id + "' has fewer than 2 tokens");
    // The text scored: the row's own, or what its ids after the first (BOS) decode to.
    g.row_bytes.push_back(row.ids.empty() ? static_cast<int64_t>(row.text.size())
                                          : decoded_bytes(engine.tokenizer(), {ids.begin() + 1, ids.end()}));
    std::vector<int32_t> fitting = ids;
    if (static_cast<int64_t>(fitting.size()) > max_len) fitting.resize(static_cast<size_t>(std::max<int64_t>(max_len, 2)));
    requests.push_back(score_request(std::move(fitting), 1, ""));
    row_ids.push_back(std::move(ids));
  }
  LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> scored, engine.run(std::move(requests)));
  double nll = 0;
  int64_t tokens = 0;
  for (size_t i = 0; i < scored.size(); ++i) {
    std::string why = unfinished_reason(scored[i]);
    const double row_nll = why.empty() ? nll_of(scored[i]) : 0;
    const int64_t row_tokens = why.empty() ? static_cast<int64_t>(scored[i].prompt_logprobs.size()) : 0;
    const std::vector<int32_t>& ids = row_ids[i];
    if (why.empty() && static_cast<size_t>(row_tokens) < ids.size() - 1) {
      why = cut_reason(static_cast<size_t>(row_tokens), ids.size() - 1, max_len);
      g.row_bytes[i] = decoded_bytes(engine.tokenizer(), {ids.begin() + 1, ids.begin() + 1 + row_tokens});
    }
    g.row_nll_sum.push_back(row_nll);
    g.row_tokens.push_back(row_tokens);
    g.row_unscored.push_back(why);
    if (!why.empty()) continue;  // a row not scored in full is no evidence of the base's quality
    nll += row_nll;
    tokens += row_tokens;
  }
  g.nll_mean = tokens > 0 ? nll / static_cast<double>(tokens) : 0;
  g.perplexity = std::exp(g.nll_mean);
  return g;
}

}  // namespace loragate::eval
