#include "model/model_dir.h"

#include <algorithm>
#include <filesystem>
#include <vector>

#include "common/sha256.h"

namespace loragate {

Result<std::shared_ptr<const ModelDir>> ModelDir::open(const std::string& path) {
  std::shared_ptr<ModelDir> dir(new ModelDir());
  dir->path_ = path;
  LG_ASSIGN_OR_RETURN(dir->config_, ModelConfig::load(path));  // before the weights: cheap
  if (std::filesystem::exists(std::filesystem::path(path) / "tokenizer.json")) {
    LG_ASSIGN_OR_RETURN(dir->tokenizer_, Tokenizer::load(path));
    // A tokenizer made for another model would produce ids the embedding
    // table does not have: refused here, not found as out-of-range reads.
    if (dir->tokenizer_->vocab_size() > dir->config_.vocab_size) {
      return Status::invalid_argument(path + "/tokenizer.json: the tokenizer has " +
                                      std::to_string(dir->tokenizer_->vocab_size()) +
                                      " tokens (special tokens included), but the model's vocab_size in config.json is " +
                                      std::to_string(dir->config_.vocab_size) + "; the tokenizer belongs to another model");
    }
  }
  LG_ASSIGN_OR_RETURN(dir->chat_template_, ChatTemplate::load(path));
  LG_ASSIGN_OR_RETURN(dir->weights_, WeightStore::open_dir(path));
  return std::shared_ptr<const ModelDir>(std::move(dir));
}

const std::string& ModelDir::sha256() const {
  std::call_once(sha_once_, [this] {
    std::vector<const SafetensorsFile*> files;
    for (const auto& f : weights_->files()) files.push_back(f.get());
    std::sort(files.begin(), files.end(),
              [](const SafetensorsFile* a, const SafetensorsFile* b) { return a->path() < b->path(); });
    constexpr size_t kChunk = 8 << 20;
    Sha256 hasher;
    for (const SafetensorsFile* f : files) {
      const std::string_view bytes = f->bytes();
      for (size_t at = 0; at < bytes.size(); at += kChunk) {
        const size_t n = std::min(kChunk, bytes.size() - at);
        hasher.update(bytes.data() + at, n);
        f->release(bytes.data() + at, n);
      }
    }
    sha256_ = hasher.finish_hex();
  });
  return sha256_;
}

}  // namespace loragate
