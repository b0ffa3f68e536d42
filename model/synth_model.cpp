// Synthetic Llama models: seeded random weights (streamed into safetensors)
// and a SentencePiece-style BPE tokenizer trained on a small built-in text.
#include "model/synth_model.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <map>
#include <numbers>
#include <unordered_map>
#include <unordered_set>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "common/atomic_file.h"
#include "common/random.h"
#include "model/safetensors.h"

namespace loragate {
namespace {

namespace fs = std::filesystem;
using ordered_json = nlohmann::ordered_json;

static_assert(std::endian::native == std::endian::little,
              "safetensors data is little-endian; a big-endian host needs byte swaps here");

// ---------------------------------------------------------------------------
// Weights

struct WeightSpec {
  std::string name;
  std::vector<int64_t> shape;
  bool is_norm;
};

std::vector<WeightSpec> weight_specs(const ModelConfig& c) {
  const int64_t h = c.hidden_size, q = c.num_attention_heads * c.head_dim,
                kv = c.num_key_value_heads * c.head_dim, f = c.intermediate_size;
  std::vector<WeightSpec> specs;
  specs.push_back({"model.embed_tokens.weight", {c.vocab_size, h}, false});
  for (int64_t l = 0; l < c.num_hidden_layers; ++l) {
    const std::string p = "model.layers." + std::to_string(l) + ".";
    specs.push_back({p + "input_layernorm.weight", {h}, true});
    specs.push_back({p + "self_attn.q_proj.weight", {q, h}, false});
    specs.push_back({p + "self_attn.k_proj.weight", {kv, h}, false});
    specs.push_back({p + "self_attn.v_proj.weight", {kv, h}, false});
    specs.push_back({p + "self_attn.o_proj.weight", {h, q}, false});
    specs.push_back({p + "post_attention_layernorm.weight", {h}, true});
    specs.push_back({p + "mlp.gate_proj.weight", {f, h}, false});
    specs.push_back({p + "mlp.up_proj.weight", {f, h}, false});
    specs.push_back({p + "mlp.down_proj.weight", {h, f}, false});
  }
  specs.push_back({"model.norm.weight", {h}, true});
  if (!c.tie_word_embeddings) specs.push_back({"lm_head.weight", {c.vocab_size, h}, false});
  return specs;
}

Status write_weights(const std::string& path, const ModelConfig& c, const SynthOptions& o) {
  if (o.dtype != DType::kF32 && o.dtype != DType::kBF16) {
    return Status::invalid_argument("synth model: dtype " + std::string(dtype_name(o.dtype)) +
                                    " is not supported (F32 or BF16)");
  }
  const std::vector<WeightSpec> specs = weight_specs(c);
  std::vector<TensorSpec> tspecs;
  for (const WeightSpec& s : specs) tspecs.push_back({s.name, o.dtype, s.shape});
  LG_ASSIGN_OR_RETURN(auto writer,
                      SafetensorsWriter::create(path, std::move(tspecs), {{"format", "pt"}}));

  constexpr size_t kChunk = size_t{1} << 16;
  std::vector<uint8_t> buf(kChunk * 4);
  const size_t esize = dtype_size(o.dtype);
  for (const WeightSpec& s : specs) {
    // Each tensor has its own stream, so its values do not depend on the others.
    uint64_t mix = o.seed;
    NormalGen gen(splitmix64(mix) ^ fnv1a64(s.name));
    size_t remaining = 1;
    for (int64_t d : s.shape) remaining *= static_cast<size_t>(d);
    const double mean = s.is_norm ? 1.0 : 0.0;
    const double stddev = 0.02;
    while (remaining > 0) {
      const size_t n = std::min(remaining, kChunk);
      for (size_t i = 0; i < n; ++i) {
        const float v = static_cast<float>(mean + stddev * gen.next());
        if (o.dtype == DType::kF32) {
          std::memcpy(&buf[i * 4], &v, 4);
        } else {
          const uint16_t b = f32_to_bf16(v);
          std::memcpy(&buf[i * 2], &b, 2);
        }
      }
      LG_RETURN_IF_ERROR(writer->append(buf.data(), n * esize));
      remaining -= n;
    }
  }
  return writer->finish();
}

// ---------------------------------------------------------------------------
// Tokenizer

const char kWordSpace[] = "\xe2\x96\x81";  // U+2581 "▁"

// A small English text (no punctuation) whose frequent pairs become merges.
const char* const kCorpus =
    "once upon a time there was a little girl named lily she liked to play in the park "
    "with her dog the dog was big and happy and they ran on the grass every day "
    "one day lily saw a red ball under a tree she wanted to get the ball but the tree was "
    "very tall so she asked her mom for help her mom said yes and they went to the tree "
    "together the sun was warm and the sky was blue the birds were singing in the trees "
    "lily was happy and she thanked her mom they played with the ball until it was time "
    "to go home at home they had a good dinner and then lily went to bed "
    "the next morning lily woke up and looked out of the window it was raining "
    "she was sad because she could not go to the park her brother tom came to her room "
    "and said do not be sad we can play a game inside they played with their toys and "
    "built a house with blocks tom said this is the best house in the world "
    "lily laughed and said you are right they were friends and they always helped each other "
    "when the rain stopped they went outside and saw a rainbow it had many colors "
    "the little bird flew over the house and the cat looked at it from the garden "
    "there was an old man who lived near the river he had a small boat and he liked to fish "
    "the children came to see him and he told them a story about a king and a dragon "
    "the king was kind and the dragon was not bad it was only lonely and wanted a friend "
    "so the king gave the dragon a big cake and they became friends forever "
    "The girl said hello The boy said thank you The dog was happy The cat was sleeping "
    "Once there was a boy named Tim He was three years old and he loved his toy car "
    "Lily and Tim and Sue and Ben and Max and Anna went to school and learned new things "
    "what is your name where do you live how are you I am fine I like it I want it "
    "he is she is it is we are they are this that these those then than when what "
    "would could should because about after before again always never something nothing";

bool is_letter_token(const std::string& t) {
  size_t i = 0;
  if (t.compare(0, 3, kWordSpace) == 0) i = 3;
  for (; i < t.size(); ++i) {
    if (t[i] < 'a' || t[i] > 'z') return false;
  }
  return true;
}

struct Vocab {
  std::vector<std::string> tokens;
  std::unordered_map<std::string, int32_t> ids;
  std::vector<std::pair<std::string, std::string>> merges;

  bool add(const std::string& t) {
    if (ids.count(t)) return false;
    ids.emplace(t, static_cast<int32_t>(tokens.size()));
    tokens.push_back(t);
    return true;
  }
};

Result<Vocab> build_vocab(int64_t vocab_size) {
  Vocab v;
  v.add("<unk>");
  v.add("<s>");
  v.add("</s>");
  for (int b = 0; b < 256; ++b) {
    char buf[8];
    std::snprintf(buf, sizeof buf, "<0x%02X>", b);
    v.add(buf);
  }
  v.add(kWordSpace);
  for (char ch = '!'; ch <= '~'; ++ch) v.add(std::string(1, ch));
  if (vocab_size < static_cast<int64_t>(v.tokens.size())) {
    return Status::invalid_argument("synth tokenizer: vocab_size " + std::to_string(vocab_size) +
                                    " is below the " + std::to_string(v.tokens.size()) +
                                    " base tokens");
  }
  auto full = [&] { return static_cast<int64_t>(v.tokens.size()) >= vocab_size; };

  // 1. BPE training on the corpus: words are "▁word", symbols start as characters.
  std::map<std::string, int64_t> word_counts;
  {
    std::string w;
    const std::string text = std::string(kCorpus) + " ";
    for (char ch : text) {
      if (ch == ' ') {
        if (!w.empty()) ++word_counts[kWordSpace + w];
        w.clear();
      } else {
        w.push_back(ch);
      }
    }
  }
  struct Word {
    std::vector<std::string> symbols;
    int64_t count;
  };
  std::vector<Word> words;
  for (const auto& [w, n] : word_counts) {
    Word word{{kWordSpace}, n};
    for (size_t i = 3; i < w.size(); ++i) word.symbols.emplace_back(1, w[i]);
    words.push_back(std::move(word));
  }
  while (!full()) {
    std::map<std::pair<std::string, std::string>, int64_t> pair_counts;
    for (const Word& w : words) {
      for (size_t i = 0; i + 1 < w.symbols.size(); ++i) {
        pair_counts[{w.symbols[i], w.symbols[i + 1]}] += w.count;
      }
    }
    const std::pair<std::string, std::string>* best = nullptr;
    int64_t best_count = 0;
    for (const auto& [pair, n] : pair_counts) {
      if (n > best_count) {
        best = &pair;
        best_count = n;
      }
    }
    if (best == nullptr || best_count < 2) break;
    const std::string merged = best->first + best->second;
    if (v.add(merged)) v.merges.push_back(*best);
    for (Word& w : words) {
      std::vector<std::string> out;
      for (size_t i = 0; i < w.symbols.size(); ++i) {
        if (i + 1 < w.symbols.size() && w.symbols[i] == best->first &&
            w.symbols[i + 1] == best->second) {
          out.push_back(merged);
          ++i;
        } else {
          out.push_back(w.symbols[i]);
        }
      }
      w.symbols = std::move(out);
    }
  }

  // 2. Fill: extend letter tokens by one letter (most frequent letters first).
  const std::string kLetters = "etaoinshrdlcumwfgypbvkjxqz";
  const size_t first_piece = v.ids.at(kWordSpace);
  while (!full()) {
    const size_t before = v.tokens.size();
    std::vector<std::string> lefts;
    for (size_t i = first_piece; i < before; ++i) {
      if (is_letter_token(v.tokens[i])) lefts.push_back(v.tokens[i]);
    }
    for (const std::string& left : lefts) {
      for (char ch : kLetters) {
        if (full()) break;
        const std::string right(1, ch);
        if (v.add(left + right)) v.merges.emplace_back(left, right);
      }
      if (full()) break;
    }
    if (v.tokens.size() == before) return Status::internal("synth tokenizer: fill made no progress");
  }
  return v;
}

ordered_json added_token(int id, const std::string& content) {
  ordered_json t;
  t["id"] = id;
  t["content"] = content;
  t["single_word"] = false;
  t["lstrip"] = false;
  t["rstrip"] = false;
  t["normalized"] = false;
  t["special"] = true;
  return t;
}

std::string tokenizer_json(const Vocab& v) {
  ordered_json j;
  j["version"] = "1.0";
  j["truncation"] = nullptr;
  j["padding"] = nullptr;
  j["added_tokens"] = {added_token(0, "<unk>"), added_token(1, "<s>"), added_token(2, "</s>")};
  j["normalizer"] = {
      {"type", "Sequence"},
      {"normalizers",
       {{{"type", "Prepend"}, {"prepend", kWordSpace}},
        {{"type", "Replace"}, {"pattern", {{"String", " "}}}, {"content", kWordSpace}}}}};
  j["pre_tokenizer"] = nullptr;
  const ordered_json bos_piece = {{"SpecialToken", {{"id", "<s>"}, {"type_id", 0}}}};
  j["post_processor"] = {
      {"type", "TemplateProcessing"},
      {"single", {bos_piece, {{"Sequence", {{"id", "A"}, {"type_id", 0}}}}}},
      {"pair",
       {bos_piece,
        {{"Sequence", {{"id", "A"}, {"type_id", 0}}}},
        {{"SpecialToken", {{"id", "<s>"}, {"type_id", 1}}}},
        {{"Sequence", {{"id", "B"}, {"type_id", 1}}}}}},
      {"special_tokens",
       {{"<s>", {{"id", "<s>"}, {"ids", {1}}, {"tokens", {"<s>"}}}}}}};
  j["decoder"] = {
      {"type", "Sequence"},
      {"decoders",
       {{{"type", "Replace"}, {"pattern", {{"String", kWordSpace}}}, {"content", " "}},
        {{"type", "ByteFallback"}},
        {{"type", "Fuse"}},
        {{"type", "Strip"}, {"content", " "}, {"start", 1}, {"stop", 0}}}}};
  ordered_json vocab = ordered_json::object();
  for (size_t i = 0; i < v.tokens.size(); ++i) vocab[v.tokens[i]] = static_cast<int64_t>(i);
  ordered_json merges = ordered_json::array();
  for (const auto& [a, b] : v.merges) merges.push_back(a + " " + b);
  j["model"] = {{"type", "BPE"},
                {"dropout", nullptr},
                {"unk_token", "<unk>"},
                {"continuing_subword_prefix", nullptr},
                {"end_of_word_suffix", nullptr},
                {"fuse_unk", true},
                {"byte_fallback", true},
                {"ignore_merges", false},
                {"vocab", std::move(vocab)},
                {"merges", std::move(merges)}};
  return j.dump(2) + "\n";
}

std::string tokenizer_config_json(const ModelConfig& c) {
  ordered_json j;
  j["tokenizer_class"] = "LlamaTokenizerFast";
  j["add_bos_token"] = true;
  j["add_eos_token"] = false;
  j["bos_token"] = "<s>";
  j["eos_token"] = "</s>";
  j["unk_token"] = "<unk>";
  j["pad_token"] = nullptr;
  j["legacy"] = true;
  j["clean_up_tokenization_spaces"] = false;
  j["model_max_length"] = c.max_position_embeddings;
  ordered_json dec = ordered_json::object();
  const char* names[] = {"<unk>", "<s>", "</s>"};
  for (int i = 0; i < 3; ++i) {
    ordered_json t = added_token(i, names[i]);
    t.erase("id");
    dec[std::to_string(i)] = std::move(t);
  }
  j["added_tokens_decoder"] = std::move(dec);
  return j.dump(2) + "\n";
}

}  // namespace

Result<ModelConfig> synth_preset_config(const std::string& preset) {
  ModelConfig c;
  c.architecture = "LlamaForCausalLM";
  c.model_type = "llama";
  c.rms_norm_eps = 1e-5;
  c.rope_theta = 10000.0;
  c.tie_word_embeddings = false;
  c.bos_token_id = 1;
  c.eos_token_ids = {2};
  if (preset == "tiny") {
    c.hidden_size = 64;
    c.intermediate_size = 176;
    c.num_hidden_layers = 2;
    c.num_attention_heads = 4;
    c.num_key_value_heads = 2;
    c.vocab_size = 512;
    c.max_position_embeddings = 512;
  } else if (preset == "110m") {
    c.hidden_size = 768;
    c.intermediate_size = 2048;
    c.num_hidden_layers = 12;
    c.num_attention_heads = 12;
    c.num_key_value_heads = 4;
    c.vocab_size = 32000;
    c.max_position_embeddings = 2048;
  } else if (preset == "1b") {
    c.hidden_size = 2048;
    c.intermediate_size = 5632;
    c.num_hidden_layers = 16;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.vocab_size = 32000;
    c.max_position_embeddings = 2048;
  } else if (preset == "8b") {  // Llama-3-8B shapes, for GPU benchmarks
    c.hidden_size = 4096;
    c.intermediate_size = 14336;
    c.num_hidden_layers = 32;
    c.num_attention_heads = 32;
    c.num_key_value_heads = 8;
    c.vocab_size = 128256;
    c.max_position_embeddings = 8192;
    c.rope_theta = 500000.0;
  } else {
    return Status::invalid_argument("unknown synth preset '" + preset +
                                    "' (known: tiny, 110m, 1b, 8b)");
  }
  c.head_dim = c.hidden_size / c.num_attention_heads;
  return c;
}

Result<std::string> synth_tokenizer_json(int64_t vocab_size) {
  LG_ASSIGN_OR_RETURN(Vocab vocab, build_vocab(vocab_size));
  return tokenizer_json(vocab);
}

Status write_synth_model(const std::string& out_dir, const SynthOptions& options) {
  LG_ASSIGN_OR_RETURN(ModelConfig config, synth_preset_config(options.preset));
  if (options.dtype != DType::kF32 && options.dtype != DType::kBF16) {
    return Status::invalid_argument("synth model: dtype " +
                                    std::string(dtype_name(options.dtype)) +
                                    " is not supported (F32 or BF16)");
  }
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::io_error(out_dir + ": cannot create directory: " + ec.message());
  const fs::path dir(out_dir);

  // config.json: ModelConfig's own serialisation plus the tensor dtype.
  ordered_json cfg = ordered_json::parse(config.to_json());
  cfg["torch_dtype"] = options.dtype == DType::kF32 ? "float32" : "bfloat16";
  LG_RETURN_IF_ERROR(write_file_atomic((dir / "config.json").string(), cfg.dump(2) + "\n"));

  ordered_json gen;
  gen["bos_token_id"] = 1;
  gen["eos_token_id"] = 2;
  LG_RETURN_IF_ERROR(
      write_file_atomic((dir / "generation_config.json").string(), gen.dump(2) + "\n"));

  LG_ASSIGN_OR_RETURN(std::string tok_json, synth_tokenizer_json(config.vocab_size));
  LG_RETURN_IF_ERROR(write_file_atomic((dir / "tokenizer.json").string(), tok_json));
  LG_RETURN_IF_ERROR(
      write_file_atomic((dir / "tokenizer_config.json").string(), tokenizer_config_json(config)));
  ordered_json stm;
  stm["bos_token"] = "<s>";
  stm["eos_token"] = "</s>";
  stm["unk_token"] = "<unk>";
  LG_RETURN_IF_ERROR(
      write_file_atomic((dir / "special_tokens_map.json").string(), stm.dump(2) + "\n"));

  return write_weights((dir / "model.safetensors").string(), config, options);
}

}  // namespace loragate
