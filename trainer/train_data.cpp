// Training JSONL files read into examples (train_data.h). The {"messages"}
// shape is rendered and masked in chat_example.cpp; the order examples are
// drawn in is batch_sampler.cpp's.
#include "trainer/train_data.h"

#include <algorithm>
#include <optional>
#include <string_view>

#include <nlohmann/json.hpp>

#include "common/json_kind.h"
#include "common/path_roots.h"
#include "common/sha256.h"
#include "trainer/chat_example.h"

namespace loragate::train {
namespace {

using nlohmann::json;

enum class TrainLineShape { kPromptCompletion, kMessages };

const char* train_shape_name(TrainLineShape shape) {
  return shape == TrainLineShape::kMessages ? "{\"messages\"}" : "{\"prompt\", \"completion\"}";
}

Result<TrainLineShape> train_line_shape(const json& obj) {
  const bool messages = obj.contains("messages");
  const bool prompt = obj.contains("prompt") || obj.contains("completion");
  if (messages && prompt) {
    return Status::invalid_argument("has both messages and prompt/completion: give one shape per line");
  }
  if (!messages && !prompt) {
    return Status::invalid_argument("must be {\"prompt\", \"completion\"} or {\"messages\": [...]}");
  }
  return messages ? TrainLineShape::kMessages : TrainLineShape::kPromptCompletion;
}

Result<std::string> train_string_field(const json& obj, const char* key) {
  auto it = obj.find(key);
  if (it == obj.end()) return Status::invalid_argument(std::string(key) + ": missing (a string is required)");
  if (!it->is_string()) {
    return Status::invalid_argument(std::string(key) + ": must be a string, got " + json_kind_name(*it));
  }
  return it->get<std::string>();
}

// The fixtures' recipe: ids = encode(prompt + completion) with BOS, the loss
// on the tokens past encode(prompt).
Result<TrainExample> prompt_completion_example(const json& obj, const Tokenizer& tokenizer, int64_t max_seq_len) {
  LG_ASSIGN_OR_RETURN(std::string prompt, train_string_field(obj, "prompt"));
  LG_ASSIGN_OR_RETURN(std::string completion, train_string_field(obj, "completion"));
  TrainExample example;
  example.ids = tokenizer.encode(prompt + completion, /*add_special_tokens=*/true);
  LG_RETURN_IF_ERROR(check_example_length(static_cast<int64_t>(example.ids.size()), max_seq_len));
  const std::vector<int32_t> prompt_ids = tokenizer.encode(prompt, /*add_special_tokens=*/true);
  if (prompt_ids.size() > example.ids.size() ||
      !std::equal(prompt_ids.begin(), prompt_ids.end(), example.ids.begin())) {
    return Status::invalid_argument(
        "the tokens of prompt + completion do not start with the tokens of prompt (the completion's first "
        "characters merge with the prompt's last token); start the completion at a token boundary");
  }
  example.target.assign(example.ids.size(), 0);
  std::fill(example.target.begin() + static_cast<std::ptrdiff_t>(prompt_ids.size()), example.target.end(),
            uint8_t{1});
  if (!example.target.empty()) example.target[0] = 0;  // nothing predicts the first token
  return example;
}

// A parsed line, or why it is not one (the position only: nlohmann's
// messages quote the bytes they read).
Result<json> parse_train_line(std::string_view line) {
  try {
    json obj = json::parse(line);
    if (!obj.is_object()) return Status::invalid_argument("must be a JSON object, got " + json_kind_name(obj));
    return obj;
  } catch (const json::parse_error& e) {
    return Status::invalid_argument("invalid JSON at column " + std::to_string(e.byte));
  } catch (const json::exception&) {  // out_of_range from a number such as 1e999
    return Status::invalid_argument("invalid JSON: a number out of range");
  }
}

// The most bytes one token of `tokenizer` stands for: a text of more than
// max_seq_len times this many bytes cannot fit in max_seq_len tokens.
size_t longest_token_bytes(const Tokenizer& tokenizer) {
  size_t longest = 1;
  for (int32_t id = 0; id < tokenizer.vocab_size(); ++id) longest = std::max(longest, tokenizer.token_bytes(id).size());
  return longest;
}

// The bytes of every string in `v` (the text a line asks to tokenise).
size_t text_bytes(const json& v) {
  if (v.is_string()) return v.get_ref<const std::string&>().size();
  size_t n = 0;
  if (v.is_array() || v.is_object()) {
    for (const json& e : v) n += text_bytes(e);
  }
  return n;
}

// A line is refused as soon as it cannot fit, before it is tokenised: a 50 MB
// line would otherwise cost gigabytes of token ids to find that out. Before
// parsing by its length (a JSON escape spells one byte in at most 6), after by
// the bytes of its strings; `token_bytes` is the longest token's.
Status check_line_can_fit(size_t bytes, size_t most, size_t token_bytes, int64_t max_seq_len, const char* what) {
  if (bytes <= most) return Status::ok();
  return Status::invalid_argument(std::string(what) + " of " + std::to_string(bytes) + " bytes cannot fit in " +
                                  std::to_string(max_seq_len) + " tokens (max_seq_len; no token is longer than " +
                                  std::to_string(token_bytes) + " bytes): refused before tokenising it; raise " +
                                  "max_seq_len or shorten it");
}

}  // namespace

int64_t TrainExample::num_targets() const {
  return static_cast<int64_t>(std::count(target.begin(), target.end(), uint8_t{1}));
}

Result<TrainData> load_train_data(const std::string& path, const Tokenizer& tokenizer,
                                  const ChatTemplate& chat_template, int64_t max_seq_len,
                                  const std::vector<std::string>& roots) {
  if (max_seq_len < 2) {
    return Status::invalid_argument("max_seq_len must be at least 2, got " + std::to_string(max_seq_len));
  }
  LG_ASSIGN_OR_RETURN(const std::string text, read_regular_file(path, kMaxTrainFileBytes, "training file", roots));
  TrainData data;
  data.sha256 = sha256_hex(text);
  const size_t token_bytes = longest_token_bytes(tokenizer);
  const size_t text_cap = static_cast<size_t>(max_seq_len) * token_bytes;
  std::optional<TrainLineShape> file_shape;
  size_t shape_line = 0;  // the first line, which set the file's shape
  size_t number = 0;
  for (size_t at = 0; at < text.size();) {
    const size_t eol = std::min(text.find('\n', at), text.size());
    std::string_view line = std::string_view(text).substr(at, eol - at);
    at = eol + 1;
    ++number;
    const std::string where = path + ":" + std::to_string(number);
    if (number == 1 && line.starts_with("\xEF\xBB\xBF")) line.remove_prefix(3);  // UTF-8 BOM
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") == std::string_view::npos) continue;
    if (static_cast<int64_t>(data.examples.size()) == kMaxTrainExamples) {
      return Status::invalid_argument(where + ": more than " + std::to_string(kMaxTrainExamples) +
                                      " examples in one training file");
    }
    LG_RETURN_IF_ERROR(
        check_line_can_fit(line.size(), 6 * text_cap + 4096, token_bytes, max_seq_len, "a line").with_context(where));
    Result<json> obj = parse_train_line(line);
    if (!obj.is_ok()) return obj.status().with_context(where);
    LG_RETURN_IF_ERROR(
        check_line_can_fit(text_bytes(*obj), text_cap, token_bytes, max_seq_len, "its text").with_context(where));
    Result<TrainLineShape> shape = train_line_shape(obj.value());
    if (!shape.is_ok()) return shape.status().with_context(where);
    if (!file_shape) {
      file_shape = shape.value();
      shape_line = number;
    } else if (*file_shape != shape.value()) {
      return Status::invalid_argument(where + ": a " + train_shape_name(shape.value()) + " line, but line " +
                                      std::to_string(shape_line) + " is " + train_shape_name(*file_shape) +
                                      ": one shape per file");
    }
    Result<TrainExample> example =
        shape.value() == TrainLineShape::kMessages
            ? chat_train_example(obj.value()["messages"], tokenizer, chat_template, max_seq_len)
            : prompt_completion_example(obj.value(), tokenizer, max_seq_len);
    if (!example.is_ok()) return example.status().with_context(where);
    const int64_t targets = example->num_targets();
    if (targets == 0) {
      return Status::invalid_argument(where + ": no token to learn (an empty completion, or no assistant turn)");
    }
    data.target_tokens += targets;
    data.examples.push_back(std::move(example).value());
  }
  if (data.examples.empty()) {
    return Status::invalid_argument(path + ": no examples: the training file has no non-blank line");
  }
  return data;
}

}  // namespace loragate::train
