#include "chat/chat_template.h"

#include <filesystem>
#include <fstream>
#include <sstream>

#include "chat/jinja_interpreter.h"
#include "chat/jinja_parser.h"

namespace loragate {
namespace {

constexpr const char* kPlainTemplate =
    "{{ bos_token }}{% for message in messages %}{{ message.role }}: {{ message.content }}\n{% endfor %}"
    "{% if add_generation_prompt %}assistant:{% endif %}";

// A token entry is a string, an AddedToken object {"content": ...} or null.
std::optional<std::string> token_entry(const nlohmann::json& cfg, const char* key) {
  auto it = cfg.find(key);
  if (it == cfg.end()) return std::nullopt;
  if (it->is_string()) return it->get<std::string>();
  if (it->is_object()) {
    auto c = it->find("content");
    if (c != it->end() && c->is_string()) return c->get<std::string>();
  }
  return std::nullopt;
}

Result<std::string> read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error("cannot read " + path);
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

Status to_status(const jinja::TemplateError& e) {
  switch (e.code()) {
    case StatusCode::kCorrupt: return Status::corrupt(e.what());
    case StatusCode::kResourceExhausted: return Status::resource_exhausted(e.what());
    case StatusCode::kUnsupported: return Status::unsupported(e.what());
    default: return Status::invalid_argument(e.what());
  }
}

}  // namespace

std::string chat_template_family(const std::string& t) {
  if (t.find("<|im_start|>") != std::string::npos) return "qwen/chatml";
  if (t.find("<|start_header_id|>") != std::string::npos) return "llama3";
  if (t.find("[INST]") != std::string::npos) return t.find("<<SYS>>") != std::string::npos ? "llama2" : "mistral";
  return "custom";
}

nlohmann::json ChatMessage::to_json() const {
  nlohmann::json m = extra.is_object() ? extra : nlohmann::json::object();
  m["role"] = role;
  m["content"] = content;
  if (reasoning_content) m["reasoning_content"] = *reasoning_content;
  return m;
}

Result<ChatTemplate> ChatTemplate::from_source(std::string template_text, SpecialTokens tokens) {
  ChatTemplate t;
  try {
    t.program_ = std::make_shared<const jinja::Program>(jinja::parse_template(template_text));
  } catch (const jinja::TemplateError& e) {
    return to_status(e);
  }
  t.family_ = chat_template_family(template_text);
  t.source_ = std::move(template_text);
  t.tokens_ = std::move(tokens);
  return t;
}

ChatTemplate ChatTemplate::plain(SpecialTokens tokens) {
  Result<ChatTemplate> r = from_source(kPlainTemplate, std::move(tokens));
  ChatTemplate t = std::move(r).value();
  t.family_ = "plain";
  t.plain_ = true;
  return t;
}

Result<ChatTemplate> ChatTemplate::from_tokenizer_config(const std::string& json_text, const std::string& source) {
  nlohmann::json cfg = nlohmann::json::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (cfg.is_discarded() || !cfg.is_object()) return Status::corrupt(source + ": not a JSON object");
  SpecialTokens tokens{token_entry(cfg, "bos_token"), token_entry(cfg, "eos_token"), token_entry(cfg, "unk_token"),
                       token_entry(cfg, "pad_token")};
  auto it = cfg.find("chat_template");
  if (it == cfg.end() || it->is_null()) return plain(std::move(tokens));
  std::string text;
  if (it->is_string()) {
    text = it->get<std::string>();
  } else if (it->is_array()) {  // [{"name": "default", "template": "..."}, {"name": "tool_use", ...}]
    for (const auto& entry : *it) {
      if (!entry.is_object() || !entry.contains("template") || !entry["template"].is_string()) continue;
      if (text.empty() || entry.value("name", "") == "default") text = entry["template"].get<std::string>();
    }
    if (text.empty()) return Status::corrupt(source + ": chat_template list has no usable template");
  } else {
    return Status::corrupt(source + ": chat_template is neither a string nor a list");
  }
  Result<ChatTemplate> t = from_source(std::move(text), std::move(tokens));
  if (!t.is_ok()) return t.status().with_context(source + ": chat_template");
  return t;
}

Result<ChatTemplate> ChatTemplate::load(const std::string& model_dir) {
  namespace fs = std::filesystem;
  std::string cfg_path = (fs::path(model_dir) / "tokenizer_config.json").string();
  std::string jinja_path = (fs::path(model_dir) / "chat_template.jinja").string();
  std::error_code ec;
  Result<ChatTemplate> base = plain();
  if (fs::exists(cfg_path, ec)) {
    LG_ASSIGN_OR_RETURN(std::string text, read_file(cfg_path));
    base = from_tokenizer_config(text, cfg_path);
    if (!base.is_ok()) return base;
  }
  if (fs::exists(jinja_path, ec)) {
    LG_ASSIGN_OR_RETURN(std::string text, read_file(jinja_path));
    Result<ChatTemplate> t = from_source(std::move(text), base->special_tokens());
    if (!t.is_ok()) return t.status().with_context(jinja_path);
    return t;
  }
  return base;
}

template <typename J>
Result<std::string> ChatTemplate::render_impl(const J& messages, bool add_generation_prompt, const J& extra_vars) const {
  if (!messages.is_array()) return Status::invalid_argument("messages must be a JSON array");
  for (const auto& m : messages)
    if (!m.is_object()) return Status::invalid_argument("each message must be a JSON object");
  if (!extra_vars.is_null() && !extra_vars.is_object())
    return Status::invalid_argument("extra template variables must be a JSON object");
  try {
    jinja::Dict vars;
    vars.set("messages", jinja::from_json(messages));
    vars.set("add_generation_prompt", jinja::Value::boolean(add_generation_prompt));
    const std::pair<const char*, const std::optional<std::string>*> toks[] = {{"bos_token", &tokens_.bos_token},
                                                                              {"eos_token", &tokens_.eos_token},
                                                                              {"unk_token", &tokens_.unk_token},
                                                                              {"pad_token", &tokens_.pad_token}};
    for (const auto& [name, tok] : toks)
      if (tok->has_value()) vars.set(name, jinja::Value::string(**tok));
    if (extra_vars.is_object())
      for (auto it = extra_vars.begin(); it != extra_vars.end(); ++it) vars.set(it.key(), jinja::from_json(it.value()));
    jinja::Interpreter interpreter;
    return interpreter.render(*program_, vars);
  } catch (const jinja::TemplateError& e) {
    return to_status(e);
  } catch (const std::exception& e) {
    return Status::internal(std::string("chat template rendering failed: ") + e.what());
  }
}

Result<std::string> ChatTemplate::render(const nlohmann::json& messages, bool add_generation_prompt,
                                         const nlohmann::json& extra_vars) const {
  return render_impl(messages, add_generation_prompt, extra_vars);
}

Result<std::string> ChatTemplate::render(const nlohmann::ordered_json& messages, bool add_generation_prompt,
                                         const nlohmann::ordered_json& extra_vars) const {
  return render_impl(messages, add_generation_prompt, extra_vars);
}

Result<std::string> ChatTemplate::render(const std::vector<ChatMessage>& messages, bool add_generation_prompt,
                                         const nlohmann::json& extra_vars) const {
  nlohmann::json arr = nlohmann::json::array();
  for (const auto& m : messages) arr.push_back(m.to_json());
  return render_impl(arr, add_generation_prompt, extra_vars);
}

}  // namespace loragate
