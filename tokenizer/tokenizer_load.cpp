// Loading: tokenizer.json and tokenizer_config.json into a TokenizerImpl.
#include <filesystem>
#include <fstream>
#include <sstream>

#include "tokenizer/tokenizer_impl.h"

namespace loragate {

using tok::Json;
using tok::json_corrupt;
using tok::json_key;

namespace {

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    if (!std::filesystem::exists(path)) return Status::not_found(path + ": no such file");
    return Status::io_error(path + ": cannot open");
  }
  std::string data;
  in.seekg(0, std::ios::end);
  auto size = in.tellg();
  if (size < 0) return Status::io_error(path + ": cannot read");
  data.resize(static_cast<size_t>(size));
  in.seekg(0);
  in.read(data.data(), size);
  if (!in) return Status::io_error(path + ": cannot read");
  return data;
}

Result<Json> read_json(const std::string& path) {
  LG_ASSIGN_OR_RETURN(std::string data, read_file(path));
  try {
    return Json::parse(data);
  } catch (const Json::exception& e) {
    return Status::corrupt(path + ": invalid JSON: " + e.what());
  }
}

// A token name in tokenizer_config.json: "<s>", {"content": "<s>", ...} or null.
Result<std::optional<std::string>> config_token(const Json& config, const char* key, const std::string& where) {
  auto it = config.find(key);
  if (it == config.end() || it->is_null()) return std::optional<std::string>();
  if (it->is_string()) return std::optional<std::string>(it->get<std::string>());
  if (it->is_object()) {
    LG_ASSIGN_OR_RETURN(std::string content, tok::json_string(*it, "content", json_key(where, key)));
    return std::optional<std::string>(content);
  }
  return json_corrupt(json_key(where, key), "expected a string, an object with \"content\", or null");
}

}  // namespace

Result<std::unique_ptr<TokenizerImpl>> TokenizerImpl::load(const std::string& json_path,
                                                           const std::string& config_path) {
  std::unique_ptr<TokenizerImpl> impl(new TokenizerImpl());
  {
    LG_ASSIGN_OR_RETURN(std::string text, read_file(json_path));
    LG_ASSIGN_OR_RETURN(tok::TokenizerFile file, tok::read_tokenizer_json(text, json_path));
    text = std::string();  // free the raw text before building the tables
    try {
      LG_RETURN_IF_ERROR(impl->parse_tokenizer(file, json_path));
    } catch (const Json::exception& e) {  // a value of an unexpected JSON type
      return Status::corrupt(json_path + ": " + e.what());
    }
  }
  if (!config_path.empty()) {
    LG_ASSIGN_OR_RETURN(Json config, read_json(config_path));
    try {
      LG_RETURN_IF_ERROR(impl->parse_config(config, config_path));
    } catch (const Json::exception& e) {
      return Status::corrupt(config_path + ": " + e.what());
    }
  }
  return impl;
}

Status TokenizerImpl::parse_tokenizer(tok::TokenizerFile& parsed, const std::string& file) {
  const std::string where = file + ": ";
  const Json& root = parsed.root;
  if (!root.is_object()) return json_corrupt(file, "expected a JSON object");

  auto model = root.find("model");
  if (model == root.end() || !model->is_object()) return json_corrupt(where + "model", "missing or not an object");
  // Files saved by old versions omit model.type; a merges array means BPE.
  std::string type = model->contains("type") ? "" : (model->contains("merges") ? "BPE" : "");
  if (type.empty()) {
    LG_ASSIGN_OR_RETURN(type, tok::json_string(*model, "type", where + "model"));
  }
  if (type != "BPE") return Status::unsupported(where + "model.type: model type '" + type + "' is not supported");
  if (!parsed.tables.error.empty()) return Status::corrupt(where + parsed.tables.error);
  LG_ASSIGN_OR_RETURN(model_, tok::BpeModel::load(*model, std::move(parsed.tables), where + "model"));

  if (auto it = root.find("normalizer"); it != root.end() && !it->is_null()) {
    LG_ASSIGN_OR_RETURN(normalizer_, tok::make_normalizer(*it, where + "normalizer"));
  }
  if (auto it = root.find("pre_tokenizer"); it != root.end() && !it->is_null()) {
    LG_ASSIGN_OR_RETURN(pre_tokenizer_, tok::make_pre_tokenizer(*it, where + "pre_tokenizer"));
  }
  if (auto it = root.find("decoder"); it != root.end() && !it->is_null()) {
    LG_ASSIGN_OR_RETURN(decoder_, tok::make_decoder(*it, where + "decoder"));
  }
  auto post = root.find("post_processor");
  LG_ASSIGN_OR_RETURN(post_processor_,
                      tok::PostProcessor::make(post == root.end() ? Json() : *post, where + "post_processor"));
  LG_RETURN_IF_ERROR(parse_added_tokens(root, file));
  bos_id_ = post_processor_.leading_id();
  eos_id_ = post_processor_.trailing_id();
  return Status::ok();
}

Status TokenizerImpl::parse_added_tokens(const Json& root, const std::string& file) {
  const std::string where = file + ": added_tokens";
  auto list = root.find("added_tokens");
  if (list != root.end() && !list->is_null() && !list->is_array()) return json_corrupt(where, "expected an array");
  if (list != root.end() && list->is_array()) {
    for (size_t i = 0; i < list->size(); ++i) {
      const Json& j = (*list)[i];
      std::string key = where + "[" + std::to_string(i) + "]";
      if (!j.is_object()) return json_corrupt(key, "expected an object");
      tok::AddedToken t;
      LG_ASSIGN_OR_RETURN(t.content, tok::json_string(j, "content", key));
      LG_ASSIGN_OR_RETURN(int64_t id, tok::json_int_or(j, "id", -1, key));
      // Added ids follow the model's; a far-off id would only waste memory.
      const int64_t limit = int64_t{model_->vocab_size()} + 16 * static_cast<int64_t>(list->size()) + 1024;
      if (id < 0 || id >= limit) return json_corrupt(key + ".id", "missing, negative or far beyond the vocabulary");
      t.id = static_cast<int32_t>(id);
      LG_ASSIGN_OR_RETURN(t.special, tok::json_bool_or(j, "special", false, key));
      // HF's default: special tokens are matched raw, others after normalising.
      LG_ASSIGN_OR_RETURN(t.normalized, tok::json_bool_or(j, "normalized", !t.special, key));
      LG_ASSIGN_OR_RETURN(t.lstrip, tok::json_bool_or(j, "lstrip", false, key));
      LG_ASSIGN_OR_RETURN(t.rstrip, tok::json_bool_or(j, "rstrip", false, key));
      LG_ASSIGN_OR_RETURN(t.single_word, tok::json_bool_or(j, "single_word", false, key));
      added_by_content_.emplace(t.content, t.id);
      added_by_id_[t.id] = added_.size();
      added_.push_back(std::move(t));
    }
  }

  vocab_size_ = model_->vocab_size();
  for (const auto& t : added_) vocab_size_ = std::max(vocab_size_, t.id + 1);
  special_.assign(static_cast<size_t>(vocab_size_), false);
  for (const auto& t : added_) {
    if (t.special) special_[static_cast<size_t>(t.id)] = true;
  }

  // Normalised tokens are searched for in normalised text, so their pattern
  // is their content run through the normaliser (as HF does).
  std::vector<std::string> raw_patterns, norm_patterns;
  std::vector<tok::AddedToken> raw_tokens, norm_tokens;
  for (const auto& t : added_) {
    if (t.normalized && normalizer_) {
      std::string p = t.content;
      normalizer_->normalize(p);
      norm_patterns.push_back(std::move(p));
      norm_tokens.push_back(t);
    } else {
      raw_patterns.push_back(t.content);
      raw_tokens.push_back(t);
    }
  }
  raw_matcher_ = tok::AddedTokenMatcher(std::move(raw_patterns), std::move(raw_tokens));
  normalized_matcher_ = tok::AddedTokenMatcher(std::move(norm_patterns), std::move(norm_tokens));
  return Status::ok();
}

Status TokenizerImpl::parse_config(const Json& config, const std::string& file) {
  const std::string where = file + ": ";
  if (!config.is_object()) return json_corrupt(file, "expected a JSON object");
  LG_ASSIGN_OR_RETURN(config_add_bos_, tok::json_bool_or(config, "add_bos_token", false, where));
  LG_ASSIGN_OR_RETURN(config_add_eos_, tok::json_bool_or(config, "add_eos_token", false, where));
  LG_ASSIGN_OR_RETURN(auto bos, config_token(config, "bos_token", where));
  LG_ASSIGN_OR_RETURN(auto eos, config_token(config, "eos_token", where));
  if (bos) {
    bos_id_ = token_to_id(*bos);
    if (!bos_id_) return json_corrupt(where + "bos_token", "'" + *bos + "' is not a token");
  }
  if (eos) {
    eos_id_ = token_to_id(*eos);
    if (!eos_id_) return json_corrupt(where + "eos_token", "'" + *eos + "' is not a token");
  }
  if (config_add_bos_ && !bos_id_) return json_corrupt(where + "add_bos_token", "true, but there is no bos_token");
  if (config_add_eos_ && !eos_id_) return json_corrupt(where + "add_eos_token", "true, but there is no eos_token");
  return Status::ok();
}

}  // namespace loragate
