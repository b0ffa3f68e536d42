#include "bases/serving_base.h"

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <vector>

#include "common/sha256.h"

namespace loragate {

namespace fs = std::filesystem;

Result<std::string> sha256_of_weights(const std::string& model_dir) {
  std::vector<fs::path> files;
  std::error_code ec;
  for (const fs::directory_entry& e : fs::directory_iterator(model_dir, ec)) {
    if (e.is_regular_file() && e.path().extension() == ".safetensors") files.push_back(e.path());
  }
  if (ec) return Status::io_error("cannot list " + model_dir + ": " + ec.message());
  if (files.empty()) return Status::not_found("no *.safetensors weights in " + model_dir);
  std::sort(files.begin(), files.end());
  Sha256 hasher;
  std::vector<char> buffer(1 << 20);
  for (const fs::path& f : files) {
    std::ifstream in(f, std::ios::binary);
    if (!in) return Status::io_error("cannot read " + f.string());
    while (in) {
      in.read(buffer.data(), static_cast<std::streamsize>(buffer.size()));
      hasher.update(buffer.data(), static_cast<size_t>(in.gcount()));
    }
    if (in.bad()) return Status::io_error("read error in " + f.string());
  }
  return hasher.finish_hex();
}

Result<std::shared_ptr<ServingBase>> ServingBase::load(const BaseSpec& spec, const EngineOptions& options,
                                                       std::shared_ptr<ComputeGate> gate, bool serving) {
  EngineOptions o = options;
  o.weight_dtype = spec.dtype;
  LG_ASSIGN_OR_RETURN(std::string sha, sha256_of_weights(spec.path));
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(spec.path, o));
  if (engine->adapters() == nullptr) return Status::invalid_argument("engine.max_loras must be > 0 to serve adapters");
  LG_ASSIGN_OR_RETURN(ChatTemplate tmpl, ChatTemplate::load(spec.path));
  auto loop = std::make_unique<EngineLoop>(std::move(engine), std::move(gate), serving);
  return std::shared_ptr<ServingBase>(new ServingBase(spec, std::move(sha), std::move(loop), std::move(tmpl)));
}

int64_t ServingBase::memory_bytes() const {
  const MemoryEstimate m = measure_engine_memory(engine());
  return m.total() + adapters()->stats().host_bytes;
}

}  // namespace loragate
