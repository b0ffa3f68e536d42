// ModelDir: a Hugging Face model directory opened once.
//
// open() reads config.json, maps and indexes the safetensors files, loads
// tokenizer.json (when present) and the chat template; sha256() identifies
// the weights by the bytes that were mapped. The runners, the engine, the
// bases and the evaluator all take this one object, so a directory is read
// once per load and every part of a base agrees on what it read.
//
// Immutable after open() (sha256() computes once, on first use); shared by
// const pointer and safe to read from any thread. The weight mapping lives
// as long as the object: a runner that converted the weights releases their
// pages (WeightStore::release), so holding it costs address space, not memory.
#pragma once

#include <memory>
#include <mutex>
#include <string>

#include "chat/chat_template.h"
#include "common/status.h"
#include "model/model_config.h"
#include "model/safetensors.h"
#include "tokenizer/tokenizer.h"

namespace loragate {

class ModelDir {
 public:
  // Every failure names the file at fault; a tokenizer with more tokens than
  // the config's vocab_size is refused (it belongs to another model).
  static Result<std::shared_ptr<const ModelDir>> open(const std::string& path);
  ModelDir(const ModelDir&) = delete;
  ModelDir& operator=(const ModelDir&) = delete;

  const std::string& path() const { return path_; }
  const ModelConfig& config() const { return config_; }
  const WeightStore& weights() const { return *weights_; }
  // nullptr when the directory has no tokenizer.json.
  const Tokenizer* tokenizer() const { return tokenizer_.get(); }
  const ChatTemplate& chat_template() const { return chat_template_; }
  // sha256 over the mapped *.safetensors files in path order: the identity
  // of the weights (registry, system_fingerprint). Computed on first call,
  // a chunk at a time, each chunk's pages released after it is hashed.
  const std::string& sha256() const;

 private:
  ModelDir() = default;

  std::string path_;
  ModelConfig config_;
  std::unique_ptr<WeightStore> weights_;
  std::unique_ptr<Tokenizer> tokenizer_;
  ChatTemplate chat_template_ = ChatTemplate::plain();
  mutable std::once_flag sha_once_;
  mutable std::string sha256_;
};

}  // namespace loragate
