// Training checkpoints: <out>/checkpoint/{state.safetensors, checkpoint.json},
// built in a fresh <out>/checkpoint.tmp-XXXXXX and swapped in whole.
//
// state.safetensors holds, per LoRA param, its a and b and the four AdamW
// moments; checkpoint.json the steps, sampler position, loss curve, the run's
// identity and the SHA-256 of state.safetensors, so that a truncated or
// altered file is refused instead of resumed from.
#include "trainer/train_checkpoint.h"

#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>

#include "common/atomic_file.h"
#include "common/sha256.h"
#include "model/safetensors.h"

namespace loragate::train {
namespace {

namespace fs = std::filesystem;
using nlohmann::json;

constexpr const char* kCheckpointFormat = "loragate-train-checkpoint";
constexpr int64_t kCheckpointVersion = 1;
constexpr const char* kStateFile = "state.safetensors";
constexpr const char* kMetaFile = "checkpoint.json";

// The six tensors of one param, in file order: a, b, then the moments in AdamW::moments() order.
constexpr const char* kCheckpointParts[6] = {"lora_A", "lora_B", "m_a", "v_a", "m_b", "v_b"};

std::string checkpoint_tensor_name(const LoraParam& p, int part) {
  return "layers." + std::to_string(p.layer) + "." + std::string(lora_module_name(p.module)) + "." +
         kCheckpointParts[part];
}

std::vector<int64_t> checkpoint_tensor_shape(const LoraParam& p, int part) {
  const bool of_a = part == 0 || part == 2 || part == 3;
  return of_a ? std::vector<int64_t>{p.rank, p.in} : std::vector<int64_t>{p.out, p.rank};
}

std::string checkpoint_errno(int err) { return std::strerror(err); }

// Loss-curve numbers: JSON has no NaN or infinity, so a non-finite value is null.
json finite_or_null(double x) { return std::isfinite(x) ? json(x) : json(nullptr); }

// --- writing -----------------------------------------------------------------

Status write_checkpoint_state(const std::string& path, const LoraParams& params, const AdamW& optimizer) {
  const std::vector<LoraParam>& ps = params.params();
  const std::vector<std::vector<float>>& moments = optimizer.moments();
  const bool have_moments = !moments.empty();
  if (have_moments && moments.size() != 4 * ps.size()) {
    return Status::internal(path + ": the optimizer holds " + std::to_string(moments.size()) + " moments for " +
                            std::to_string(ps.size()) + " params");
  }
  std::vector<TensorSpec> specs;
  for (const LoraParam& p : ps) {
    for (int part = 0; part < 6; ++part) specs.push_back({checkpoint_tensor_name(p, part), DType::kF32, checkpoint_tensor_shape(p, part)});
  }
  LG_ASSIGN_OR_RETURN(auto writer, SafetensorsWriter::create(path, std::move(specs)));
  for (size_t i = 0; i < ps.size(); ++i) {
    const LoraParam& p = ps[i];
    for (int part = 0; part < 6; ++part) {
      const std::vector<float>* v = part == 0 ? &p.a : part == 1 ? &p.b : have_moments ? &moments[4 * i + (part - 2)] : nullptr;
      const size_t want = part == 0 || part == 2 || part == 3 ? p.a.size() : p.b.size();
      if (v && v->size() != want) {
        return Status::internal(path + ": " + checkpoint_tensor_name(p, part) + " has " + std::to_string(v->size()) +
                                " values, not " + std::to_string(want));
      }
      if (v) {
        LG_RETURN_IF_ERROR(writer->append(v->data(), v->size() * sizeof(float)));
      } else {
        // Before the first step: zero moments, which is what AdamW starts from.
        const std::vector<float> zeros(want, 0.0f);
        LG_RETURN_IF_ERROR(writer->append(zeros.data(), zeros.size() * sizeof(float)));
      }
    }
  }
  return writer->finish();
}

json checkpoint_meta_json(const CheckpointState& state, const AdamW& optimizer, const RunIdentity& identity,
                          const std::string& state_sha256) {
  json curve = json::array();
  for (const LossPoint& pt : state.curve) {
    curve.push_back({{"step", pt.step},
                     {"loss", finite_or_null(pt.loss)},
                     {"grad_norm", finite_or_null(pt.grad_norm)},
                     {"lr", finite_or_null(pt.lr)},
                     {"tokens", pt.tokens}});
  }
  return {{"format", kCheckpointFormat},
          {"version", kCheckpointVersion},
          {"step", state.step},
          {"optimizer_steps", optimizer.steps_taken()},
          {"sampler_position", state.sampler_position},
          {"curve", curve},
          {"identity",
           {{"config", identity.config}, {"data_sha256", identity.data_sha256}, {"base_sha256", identity.base_sha256}}},
          {"state_sha256", state_sha256}};
}

// Puts the complete folder `fresh` at `target`, replacing any folder there in
// one step where the filesystem can exchange names (renameat2), else in two
// (target -> target.old, fresh -> target), which load_checkpoint recovers from.
Status swap_in_checkpoint(const std::string& fresh, const std::string& target) {
  std::error_code ec;
  if (!fs::exists(target, ec)) {
    if (::rename(fresh.c_str(), target.c_str()) != 0) {
      return Status::io_error(target + ": cannot rename the new checkpoint into place: " + checkpoint_errno(errno));
    }
    return Status::ok();
  }
  if (::renameat2(AT_FDCWD, fresh.c_str(), AT_FDCWD, target.c_str(), RENAME_EXCHANGE) == 0) {
    fs::remove_all(fresh, ec);  // now the previous checkpoint
    return Status::ok();
  }
  if (errno != EINVAL && errno != ENOSYS && errno != ENOTSUP) {
    return Status::io_error(target + ": cannot exchange with the new checkpoint: " + checkpoint_errno(errno));
  }
  const std::string old = target + ".old";
  fs::remove_all(old, ec);
  if (::rename(target.c_str(), old.c_str()) != 0) {
    return Status::io_error(target + ": cannot move the previous checkpoint aside: " + checkpoint_errno(errno));
  }
  if (::rename(fresh.c_str(), target.c_str()) != 0) {
    const int err = errno;
    (void)::rename(old.c_str(), target.c_str());
    return Status::io_error(target + ": cannot rename the new checkpoint into place: " + checkpoint_errno(err));
  }
  fs::remove_all(old, ec);
  return Status::ok();
}

// Leftovers of an interrupted save: temporary folders, and a previous
// checkpoint moved aside once the new one is in place (or always, with
// `everything`, which takes the checkpoint too). One run writes to an output
// folder at a time.
Status remove_checkpoint_files(const std::string& out_dir, bool everything) {
  std::error_code ec;
  const bool have_checkpoint = fs::exists(fs::path(out_dir) / "checkpoint", ec);
  std::vector<fs::path> stale;
  for (const fs::directory_entry& e : fs::directory_iterator(out_dir, ec)) {
    const std::string name = e.path().filename().string();
    if (name.starts_with("checkpoint.tmp-") || (name == "checkpoint.old" && (have_checkpoint || everything)) ||
        (name == "checkpoint" && everything)) {
      stale.push_back(e.path());
    }
  }
  for (const fs::path& p : stale) {
    fs::remove_all(p, ec);
    if (ec) return Status::io_error(p.string() + ": cannot remove: " + ec.message());
  }
  return Status::ok();
}

// --- reading -----------------------------------------------------------------

Status checkpoint_corrupt(const std::string& where, const std::string& why) {
  return Status::corrupt(where + ": " + why + "; the checkpoint is damaged (delete it to start afresh)");
}

Result<int64_t> checkpoint_int(const json& meta, const char* key, const std::string& where) {
  auto it = meta.find(key);
  if (it == meta.end() || !it->is_number_integer()) return checkpoint_corrupt(where, std::string("'") + key + "' is missing or not an integer");
  if (it->is_number_unsigned() && it->get<uint64_t>() > static_cast<uint64_t>(std::numeric_limits<int64_t>::max())) {
    return checkpoint_corrupt(where, std::string("'") + key + "' is out of range");
  }
  const int64_t v = it->get<int64_t>();
  if (v < 0) return checkpoint_corrupt(where, std::string("'") + key + "' is negative");
  return v;
}

Result<double> checkpoint_number(const json& point, const char* key, const std::string& where) {
  auto it = point.find(key);
  if (it == point.end()) return checkpoint_corrupt(where, std::string("a curve point lacks '") + key + "'");
  if (it->is_null()) return std::numeric_limits<double>::quiet_NaN();
  if (!it->is_number()) return checkpoint_corrupt(where, std::string("a curve point's '") + key + "' is not a number");
  return it->get<double>();
}

Result<std::vector<LossPoint>> checkpoint_curve(const json& meta, const std::string& where) {
  auto it = meta.find("curve");
  if (it == meta.end() || !it->is_array()) return checkpoint_corrupt(where, "'curve' is missing or not a list");
  std::vector<LossPoint> curve;
  for (const json& p : *it) {
    if (!p.is_object()) return checkpoint_corrupt(where, "a curve point is not an object");
    LossPoint pt;
    LG_ASSIGN_OR_RETURN(pt.step, checkpoint_int(p, "step", where));
    LG_ASSIGN_OR_RETURN(pt.loss, checkpoint_number(p, "loss", where));
    LG_ASSIGN_OR_RETURN(pt.grad_norm, checkpoint_number(p, "grad_norm", where));
    LG_ASSIGN_OR_RETURN(pt.lr, checkpoint_number(p, "lr", where));
    LG_ASSIGN_OR_RETURN(pt.tokens, checkpoint_int(p, "tokens", where));
    curve.push_back(pt);
  }
  return curve;
}

// The string at `key` of `obj`, or "" when absent or not a string.
std::string checkpoint_string(const json& obj, const char* key) {
  auto it = obj.find(key);
  return it != obj.end() && it->is_string() ? it->get<std::string>() : std::string();
}

// "lora.rank, optimizer.lr": where two configs differ (JSON Patch paths, dotted).
std::string config_differences(const json& saved, const json& now) {
  std::string out;
  int shown = 0;
  const json patch = json::diff(saved, now);
  for (const json& op : patch) {
    std::string path = checkpoint_string(op, "path");
    if (path.empty()) path = "(the whole config)";
    if (path.front() == '/') path.erase(0, 1);
    std::replace(path.begin(), path.end(), '/', '.');
    if (out.find(path) != std::string::npos) continue;
    if (++shown > 6) {
      out += ", ...";
      break;
    }
    out += (out.empty() ? "" : ", ") + path;
  }
  return out;
}

std::string short_sha(const std::string& sha) { return sha.size() > 12 ? sha.substr(0, 12) + "..." : sha; }

// What makes `saved` another run than `now`, or "" when nothing does.
std::string identity_differences(const json& saved, const RunIdentity& now) {
  std::vector<std::string> what;
  const json config = saved.contains("config") ? saved.at("config") : json();
  if (config != now.config) what.push_back("the training config differs (at " + config_differences(config, now.config) + ")");
  const std::string data = checkpoint_string(saved, "data_sha256");
  if (data != now.data_sha256) {
    what.push_back("the training data differ (data sha256 " + short_sha(data) + " then, " + short_sha(now.data_sha256) + " now)");
  }
  const std::string base = checkpoint_string(saved, "base_sha256");
  if (base != now.base_sha256) {
    what.push_back("the base model differs (base sha256 " + short_sha(base) + " then, " + short_sha(now.base_sha256) + " now)");
  }
  std::string out;
  for (const std::string& w : what) out += (out.empty() ? "" : "; ") + w;
  return out;
}

Result<json> read_checkpoint_meta(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return Status::io_error(path + ": cannot be opened for reading");
  std::ostringstream text;
  text << in.rdbuf();
  if (in.bad()) return Status::io_error(path + ": read failed");
  json meta = json::parse(text.str(), nullptr, /*allow_exceptions=*/false);
  if (meta.is_discarded() || !meta.is_object()) return checkpoint_corrupt(path, "is not valid JSON (truncated?)");
  if (checkpoint_string(meta, "format") != kCheckpointFormat) return checkpoint_corrupt(path, "is not a loragate training checkpoint");
  if (!meta.contains("version") || meta.at("version") != kCheckpointVersion) {
    return Status::unsupported(path + ": checkpoint version " + (meta.contains("version") ? meta.at("version").dump() : "?") +
                               " is not the version " + std::to_string(kCheckpointVersion) + " this loragate reads");
  }
  if (!meta.contains("identity") || !meta.at("identity").is_object()) return checkpoint_corrupt(path, "'identity' is missing");
  if (!meta.contains("state_sha256") || !meta.at("state_sha256").is_string()) {
    return checkpoint_corrupt(path, "'state_sha256' is missing");
  }
  return meta;
}

}  // namespace

Status save_checkpoint(const std::string& out_dir, const LoraParams& params, const AdamW& optimizer,
                       const CheckpointState& state, const RunIdentity& identity) {
  std::error_code ec;
  fs::create_directories(out_dir, ec);
  if (ec) return Status::io_error(out_dir + ": cannot create directory: " + ec.message());
  LG_RETURN_IF_ERROR(remove_checkpoint_files(out_dir, /*everything=*/false));

  std::string tmpl = (fs::path(out_dir) / "checkpoint.tmp-XXXXXX").string();
  if (::mkdtemp(tmpl.data()) == nullptr) {
    return Status::io_error(tmpl + ": cannot create a temporary folder: " + checkpoint_errno(errno));
  }
  const std::string tmp = tmpl;
  auto written = [&]() -> Status {
    const std::string state_path = tmp + "/" + kStateFile;
    LG_RETURN_IF_ERROR(write_checkpoint_state(state_path, params, optimizer));
    LG_ASSIGN_OR_RETURN(const std::string sha, sha256_file(state_path));
    const json meta = checkpoint_meta_json(state, optimizer, identity, sha);
    LG_RETURN_IF_ERROR(write_file_atomic(tmp + "/" + kMetaFile, meta.dump(1) + "\n"));  // syncs tmp too
    LG_RETURN_IF_ERROR(swap_in_checkpoint(tmp, (fs::path(out_dir) / "checkpoint").string()));
    return sync_directory(out_dir);
  }();
  if (!written.is_ok()) fs::remove_all(tmp, ec);
  return written;
}

Result<CheckpointState> load_checkpoint(const std::string& out_dir, LoraParams& params, AdamW& optimizer,
                                        const RunIdentity& identity) {
  std::error_code ec;
  std::string dir = (fs::path(out_dir) / "checkpoint").string();
  if (!fs::exists(dir, ec)) {
    // A save interrupted between its two renames left the previous one aside.
    if (fs::exists(dir + ".old", ec)) {
      dir += ".old";
    } else {
      return Status::not_found(dir + ": no checkpoint to resume from");
    }
  }
  if (!fs::is_directory(dir, ec)) return checkpoint_corrupt(dir, "is not a folder");

  const std::string meta_path = dir + "/" + kMetaFile;
  if (!fs::exists(meta_path, ec)) return checkpoint_corrupt(dir, std::string(kMetaFile) + " is missing");
  LG_ASSIGN_OR_RETURN(const json meta, read_checkpoint_meta(meta_path));

  if (const std::string diff = identity_differences(meta.at("identity"), identity); !diff.empty()) {
    return Status::failed_precondition(dir + " belongs to another run: " + diff +
                                       "; train afresh (without resume) or into another output folder");
  }

  CheckpointState state;
  LG_ASSIGN_OR_RETURN(state.step, checkpoint_int(meta, "step", meta_path));
  LG_ASSIGN_OR_RETURN(state.sampler_position, checkpoint_int(meta, "sampler_position", meta_path));
  LG_ASSIGN_OR_RETURN(const int64_t optimizer_steps, checkpoint_int(meta, "optimizer_steps", meta_path));
  LG_ASSIGN_OR_RETURN(state.curve, checkpoint_curve(meta, meta_path));

  const std::string state_path = dir + "/" + kStateFile;
  if (!fs::exists(state_path, ec)) return checkpoint_corrupt(dir, std::string(kStateFile) + " is missing");
  LG_ASSIGN_OR_RETURN(const std::string sha, sha256_file(state_path));
  if (sha != meta.at("state_sha256").get<std::string>()) {
    return checkpoint_corrupt(state_path, "does not match the SHA-256 " + std::string(kMetaFile) +
                                              " records (truncated or altered)");
  }
  auto opened = SafetensorsFile::open(state_path);
  if (!opened.is_ok()) return checkpoint_corrupt(state_path, opened.status().message());
  const SafetensorsFile& file = **opened;

  // Everything into temporaries first: a refused checkpoint changes nothing.
  const std::vector<LoraParam>& ps = params.params();
  if (file.tensors().size() != 6 * ps.size()) {
    return Status::failed_precondition(state_path + ": holds " + std::to_string(file.tensors().size()) +
                                       " tensors, but the run's adapter needs " + std::to_string(6 * ps.size()));
  }
  std::vector<std::vector<float>> values;
  values.reserve(6 * ps.size());
  for (const LoraParam& p : ps) {
    for (int part = 0; part < 6; ++part) {
      const std::string name = checkpoint_tensor_name(p, part);
      const std::vector<int64_t> shape = checkpoint_tensor_shape(p, part);
      const TensorView* t = file.find(name);
      if (!t || t->dtype != DType::kF32 || t->shape != shape) {
        return Status::failed_precondition(state_path + ": has no f32 tensor '" + name + "' of the shape the run's adapter needs");
      }
      std::vector<float> v(static_cast<size_t>(t->numel()));
      std::memcpy(v.data(), t->data, v.size() * sizeof(float));
      values.push_back(std::move(v));
    }
  }
  std::vector<std::vector<float>> moments(4 * ps.size());
  for (size_t i = 0; i < ps.size(); ++i) {
    LoraParam& p = params.params()[i];
    p.a = std::move(values[6 * i]);
    p.b = std::move(values[6 * i + 1]);
    for (int k = 0; k < 4; ++k) moments[4 * i + static_cast<size_t>(k)] = std::move(values[6 * i + 2 + static_cast<size_t>(k)]);
  }
  optimizer.moments() = std::move(moments);
  optimizer.set_steps_taken(optimizer_steps);
  return state;
}

Status remove_checkpoint(const std::string& out_dir) {
  std::error_code ec;
  if (!fs::exists(out_dir, ec)) return Status::ok();
  return remove_checkpoint_files(out_dir, /*everything=*/true);
}

}  // namespace loragate::train
