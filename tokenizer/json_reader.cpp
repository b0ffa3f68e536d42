#include "tokenizer/json_reader.h"

namespace loragate::tok {
namespace {

// Builds a tree like nlohmann's own DOM parser, except inside model.vocab and
// model.merges, whose entries go straight into BpeTables.
class TokenizerSax : public nlohmann::json_sax<Json> {
 public:
  explicit TokenizerSax(TokenizerFile& out) : out_(out) {}

  bool null() override { return value(Json(nullptr)); }
  bool boolean(bool v) override { return value(Json(v)); }
  bool number_integer(number_integer_t v) override {
    if (mode_ == Mode::kVocab && depth_ == 0) return vocab_id(v);
    return value(Json(v));
  }
  bool number_unsigned(number_unsigned_t v) override {
    if (mode_ == Mode::kVocab && depth_ == 0) return vocab_id(v > INT64_MAX ? -1 : static_cast<int64_t>(v));
    return value(Json(v));
  }
  bool number_float(number_float_t v, const string_t&) override { return value(Json(v)); }
  bool string(string_t& v) override {
    if (mode_ == Mode::kMerges) {
      if (depth_ == 0) return legacy_merge(v);
      if (depth_ == 1) pair_.push_back(std::move(v));
      else bad_merge();
      return true;
    }
    return value(Json(std::move(v)));
  }
  bool binary(binary_t& v) override { return value(Json(std::move(v))); }

  bool start_object(std::size_t) override {
    if (mode_ != Mode::kDom) {
      ++depth_;
      if (mode_ == Mode::kVocab) bad_vocab();
      if (mode_ == Mode::kMerges) bad_merge();
      return true;
    }
    if (is_model_member("vocab")) {
      mode_ = Mode::kVocab;
      depth_ = 0;
      out_.tables.has_vocab = true;
      return true;
    }
    Json* node = insert(Json::object());
    if (stack_.size() == 1 && key_ == "model") model_ = node;
    stack_.push_back(node);
    return true;
  }
  bool end_object() override {
    if (mode_ != Mode::kDom) {
      if (depth_-- == 0) mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool start_array(std::size_t) override {
    if (mode_ != Mode::kDom) {
      ++depth_;
      if (mode_ == Mode::kVocab) bad_vocab();
      if (mode_ == Mode::kMerges && depth_ == 1) pair_.clear();
      if (mode_ == Mode::kMerges && depth_ > 1) bad_merge();
      return true;
    }
    if (is_model_member("merges")) {
      mode_ = Mode::kMerges;
      depth_ = 0;
      out_.tables.has_merges = true;
      return true;
    }
    stack_.push_back(insert(Json::array()));
    return true;
  }
  bool end_array() override {
    if (mode_ == Mode::kMerges && depth_ == 1) {
      if (pair_.size() == 2) {
        out_.tables.merges.emplace_back(std::move(pair_[0]), std::move(pair_[1]));
      } else {
        bad_merge();
        out_.tables.merges.emplace_back();
      }
    }
    if (mode_ != Mode::kDom) {
      if (depth_-- == 0) mode_ = Mode::kDom;
      return true;
    }
    stack_.pop_back();
    return true;
  }
  bool key(string_t& k) override {
    key_ = std::move(k);
    return true;
  }
  bool parse_error(std::size_t, const std::string&, const nlohmann::detail::exception& e) override {
    error_ = e.what();
    return false;
  }
  const std::string& error() const { return error_; }

 private:
  enum class Mode { kDom, kVocab, kMerges };

  bool is_model_member(const char* name) const {
    return model_ != nullptr && stack_.size() == 2 && stack_.back() == model_ && key_ == name;
  }
  Json* insert(Json v) {
    if (stack_.empty()) {
      out_.root = std::move(v);
      return &out_.root;
    }
    Json& top = *stack_.back();
    if (top.is_array()) {
      top.push_back(std::move(v));
      return &top.back();
    }
    Json& slot = top[key_];
    slot = std::move(v);
    return &slot;
  }
  bool value(Json v) {
    if (mode_ == Mode::kVocab) {
      if (depth_ == 0) bad_vocab();
      return true;
    }
    if (mode_ == Mode::kMerges) {
      bad_merge();
      return true;
    }
    insert(std::move(v));
    return true;
  }
  bool vocab_id(int64_t id) {
    if (id < 0 || id > INT32_MAX) {
      bad_vocab();
    } else {
      out_.tables.vocab.emplace_back(key_, id);
    }
    return true;
  }
  bool legacy_merge(std::string& s) {
    size_t space = s.find(' ');
    if (space == std::string::npos) {
      set_error("model.merges[" + std::to_string(out_.tables.merges.size()) + "]", "expected \"left right\"");
      out_.tables.merges.emplace_back();
    } else {
      out_.tables.merges.emplace_back(s.substr(0, space), s.substr(space + 1));
    }
    return true;
  }
  void bad_vocab() { set_error("model.vocab[\"" + key_ + "\"]", "expected a non-negative integer id"); }
  void bad_merge() {
    set_error("model.merges[" + std::to_string(out_.tables.merges.size()) + "]",
              "expected \"left right\" or [\"left\", \"right\"]");
    if (depth_ == 0) out_.tables.merges.emplace_back();  // keep later indices right
  }
  void set_error(const std::string& key, const std::string& what) {
    if (out_.tables.error.empty()) out_.tables.error = key + ": " + what;
  }

  TokenizerFile& out_;
  std::vector<Json*> stack_;
  std::string key_;
  Json* model_ = nullptr;
  Mode mode_ = Mode::kDom;
  int depth_ = 0;  // nesting inside the streamed member
  std::vector<std::string> pair_;
  std::string error_;
};

}  // namespace

Result<TokenizerFile> read_tokenizer_json(const std::string& text, const std::string& path) {
  TokenizerFile file;
  TokenizerSax sax(file);
  bool ok = false;
  try {
    ok = Json::sax_parse(text, &sax);
  } catch (const Json::exception& e) {
    return Status::corrupt(path + ": invalid JSON: " + e.what());
  }
  if (!ok) return Status::corrupt(path + ": invalid JSON: " + sax.error());
  return file;
}

}  // namespace loragate::tok
