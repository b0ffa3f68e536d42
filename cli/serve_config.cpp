#include "cli/serve_config.h"

#include <yaml-cpp/yaml.h>

#include <unistd.h>

#include <cctype>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "common/sha256.h"

namespace loragate {
namespace {

// Reads one YAML mapping, refusing keys it does not know.
class Section {
 public:
  Section(const YAML::Node& node, std::string path) : node_(node), path_(std::move(path)) {}

  Status check_keys(const std::set<std::string>& known) const {
    if (!node_) return Status::ok();
    if (!node_.IsMap()) return Status::invalid_argument(path_ + ": must be a mapping");
    for (const auto& kv : node_) {
      // A complex key ("? {a: 1}") has no string form: as<std::string>() would throw.
      if (!kv.first.IsScalar()) return Status::invalid_argument(path_ + ": keys must be plain names");
      const std::string key = kv.first.as<std::string>();
      if (!known.count(key)) {
        std::string list;
        for (const std::string& k : known) list += (list.empty() ? "" : ", ") + k;
        return Status::invalid_argument(key_path(key) + ": unknown key (known: " + list + ")");
      }
    }
    return Status::ok();
  }

  template <typename T>
  Status read(const std::string& key, T& out) const {
    if (!node_ || !node_[key] || node_[key].IsNull()) return Status::ok();
    try {
      out = node_[key].as<T>();
    } catch (const YAML::Exception&) {
      return Status::invalid_argument(key_path(key) + ": wrong type for value '" + YAML::Dump(node_[key]) + "'");
    }
    return Status::ok();
  }

  // Reads a number and checks min <= value <= max.
  template <typename T>
  Status read_range(const std::string& key, T& out, T min, T max) const {
    LG_RETURN_IF_ERROR(read(key, out));
    if (out < min || out > max) {
      return Status::invalid_argument(key_path(key) + ": " + std::to_string(out) + " is outside [" +
                                      std::to_string(min) + ", " + std::to_string(max) + "]");
    }
    return Status::ok();
  }

  Status read_ms(const std::string& key, std::chrono::milliseconds& out) const {
    int64_t ms = out.count();
    LG_RETURN_IF_ERROR(read_range<int64_t>(key, ms, 1, 3'600'000));
    out = std::chrono::milliseconds(ms);
    return Status::ok();
  }

  YAML::Node child(const std::string& key) const { return node_ ? node_[key] : YAML::Node(); }
  std::string key_path(const std::string& key) const { return path_.empty() ? key : path_ + "." + key; }

 private:
  YAML::Node node_;
  std::string path_;
};

Status parse_server(const Section& s, ServerOptions& o) {
  LG_RETURN_IF_ERROR(s.check_keys({"host", "port", "io_threads", "max_body_bytes", "max_header_bytes",
                                   "max_connections", "max_queued_requests", "read_timeout_ms", "idle_timeout_ms",
                                   "write_timeout_ms", "shutdown_deadline_ms", "max_stream_buffer_bytes",
                                   "public_listings", "tool_call_parser"}));
  LG_RETURN_IF_ERROR(s.read("host", o.host));
  int64_t port = o.port;
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("port", port, 0, 65535));
  o.port = static_cast<uint16_t>(port);
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("io_threads", o.io_threads, 1, 256));
  LG_RETURN_IF_ERROR(s.read_range<uint64_t>("max_body_bytes", o.max_body_bytes, 1024, 1ull << 30));
  LG_RETURN_IF_ERROR(s.read_range<uint32_t>("max_header_bytes", o.max_header_bytes, 1024, 1u << 20));
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("max_connections", o.max_connections, 1, 1'000'000));
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("max_queued_requests", o.max_queued_requests, 1, 1'000'000));
  LG_RETURN_IF_ERROR(s.read_ms("read_timeout_ms", o.read_timeout));
  LG_RETURN_IF_ERROR(s.read_ms("idle_timeout_ms", o.idle_timeout));
  LG_RETURN_IF_ERROR(s.read_ms("write_timeout_ms", o.write_timeout));
  LG_RETURN_IF_ERROR(s.read_ms("shutdown_deadline_ms", o.shutdown_deadline));
  LG_RETURN_IF_ERROR(s.read_range<uint64_t>("max_stream_buffer_bytes", o.max_stream_buffer_bytes, 4096, 1ull << 30));
  LG_RETURN_IF_ERROR(s.read("public_listings", o.public_listings));
  LG_RETURN_IF_ERROR(s.read("tool_call_parser", o.tool_call_parser));
  if (!valid_tool_call_parser(o.tool_call_parser)) {
    return Status::invalid_argument(s.key_path("tool_call_parser") + " must be auto, hermes, llama3_json or none, got '" +
                                    o.tool_call_parser + "'");
  }
  return Status::ok();
}

Status parse_engine(const Section& s, ServeConfig& c) {
  EngineOptions& o = c.engine;
  LG_RETURN_IF_ERROR(s.check_keys({"max_num_batched_tokens", "max_num_seqs", "kv_cache_mib", "kv_block_size",
                                   "max_model_len", "max_loras", "max_lora_rank", "adapter_host_mib",
                                   "max_logits_rows", "max_background_tokens", "candidate_share",
                                   "memory_budget_mib", "prefix_caching"}));
  LG_RETURN_IF_ERROR(s.read("prefix_caching", o.prefix_caching));
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("max_logits_rows", o.max_logits_rows, 1, 1 << 20));
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("max_background_tokens", o.max_background_tokens, 1, 1 << 20));
  LG_RETURN_IF_ERROR(s.read_range<double>("candidate_share", c.candidate_share, 0.0, 1.0));
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("memory_budget_mib", c.memory_budget_mib, 0, 1ll << 40));
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("max_num_batched_tokens", o.max_num_batched_tokens, 1, 1 << 20));
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("max_num_seqs", o.max_num_seqs, 1, 65536));
  int64_t kv_mib = o.kv_cache_bytes >> 20;
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("kv_cache_mib", kv_mib, 1, 1 << 20));
  o.kv_cache_bytes = kv_mib << 20;
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("kv_block_size", o.kv_block_size, 1, 1024));
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("max_model_len", o.max_model_len, 0, 1 << 24));
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("max_loras", o.max_loras, 0, 4096));
  LG_RETURN_IF_ERROR(s.read_range<int32_t>("max_lora_rank", o.max_lora_rank, 1, 1024));
  int64_t host_mib = o.adapter_host_bytes >> 20;
  LG_RETURN_IF_ERROR(s.read_range<int64_t>("adapter_host_mib", host_mib, 1, 1 << 24));
  o.adapter_host_bytes = host_mib << 20;
  return Status::ok();
}

}  // namespace

Result<ServeConfig> ServeConfig::parse(const std::string& yaml_text, const std::string& source) {
  YAML::Node root;
  try {
    root = YAML::Load(yaml_text);
  } catch (const YAML::Exception& e) {
    return Status::invalid_argument(source + ": invalid YAML: " + e.what());
  }
  ServeConfig c;
  if (root.IsNull()) return c;
  auto in_file = [&](Status s) { return s.with_context(source); };
  const Section top(root, "");
  LG_RETURN_IF_ERROR(
      in_file(top.check_keys({"server", "model", "engine", "adapters", "bases", "evaluation", "training", "fleet", "scenarios",
                              "auth", "demo"})));
  LG_RETURN_IF_ERROR(in_file(parse_server(Section(top.child("server"), "server"), c.server)));
  LG_RETURN_IF_ERROR(in_file(parse_engine(Section(top.child("engine"), "engine"), c)));

  const Section model(top.child("model"), "model");
  LG_RETURN_IF_ERROR(in_file(model.check_keys({"path", "served_name", "dtype", "outlier_threshold", "device"})));
  LG_RETURN_IF_ERROR(in_file(model.read("path", c.model_path)));
  LG_RETURN_IF_ERROR(in_file(model.read("served_name", c.served_model_name)));
  std::string dtype = "f32";
  LG_RETURN_IF_ERROR(in_file(model.read("dtype", dtype)));
  Result<WeightType> storage = parse_weight_type(dtype);
  if (!storage.is_ok()) return Status::invalid_argument(source + ": model." + storage.status().message());
  c.engine.weight_dtype = *storage;
  std::string device = "cpu";
  LG_RETURN_IF_ERROR(in_file(model.read("device", device)));
  Result<Device> where = parse_device(device);
  if (!where.is_ok()) return Status::invalid_argument(source + ": model." + where.status().message());
  c.engine.device = *where;
  LG_RETURN_IF_ERROR(in_file(model.read("outlier_threshold", c.engine.outlier_threshold)));
  if (!(c.engine.outlier_threshold > 0)) {
    return Status::invalid_argument(source + ": model.outlier_threshold must be > 0");
  }

  const Section adapters(top.child("adapters"), "adapters");
  LG_RETURN_IF_ERROR(in_file(adapters.check_keys({"roots", "registry", "preload"})));
  LG_RETURN_IF_ERROR(in_file(adapters.read("roots", c.adapter_roots)));
  LG_RETURN_IF_ERROR(in_file(adapters.read("registry", c.registry_path)));
  const YAML::Node preload = adapters.child("preload");
  if (preload && !preload.IsNull()) {
    if (!preload.IsSequence()) return Status::invalid_argument(source + ": adapters.preload must be a list");
    for (size_t i = 0; i < preload.size(); ++i) {
      const Section item(preload[i], "adapters.preload[" + std::to_string(i) + "]");
      LG_RETURN_IF_ERROR(in_file(item.check_keys({"name", "path"})));
      PreloadAdapter p;
      LG_RETURN_IF_ERROR(in_file(item.read("name", p.name)));
      LG_RETURN_IF_ERROR(in_file(item.read("path", p.path)));
      if (p.name.empty() || p.path.empty()) {
        return Status::invalid_argument(source + ": adapters.preload[" + std::to_string(i) + "] needs name and path");
      }
      c.preload.push_back(std::move(p));
    }
  }

  const Section bases(top.child("bases"), "bases");
  LG_RETURN_IF_ERROR(in_file(bases.check_keys({"roots"})));
  LG_RETURN_IF_ERROR(in_file(bases.read("roots", c.base_roots)));

  const Section evaluation(top.child("evaluation"), "evaluation");
  LG_RETURN_IF_ERROR(
      in_file(evaluation.check_keys({"roots", "require_pass_to_promote", "suite", "gates", "max_running"})));
  LG_RETURN_IF_ERROR(in_file(evaluation.read("roots", c.eval_roots)));
  LG_RETURN_IF_ERROR(in_file(evaluation.read("require_pass_to_promote", c.require_evaluation)));
  LG_RETURN_IF_ERROR(in_file(evaluation.read("suite", c.eval_suite)));
  LG_RETURN_IF_ERROR(in_file(evaluation.read("gates", c.eval_gates)));
  LG_RETURN_IF_ERROR(in_file(evaluation.read_range<int32_t>("max_running", c.eval_max_running, 1, 64)));

  const Section training(top.child("training"), "training");
  LG_RETURN_IF_ERROR(in_file(training.check_keys({"roots", "dir"})));
  LG_RETURN_IF_ERROR(in_file(training.read("roots", c.training_roots)));
  LG_RETURN_IF_ERROR(in_file(training.read("dir", c.training_dir)));

  const Section fleet(top.child("fleet"), "fleet");
  LG_RETURN_IF_ERROR(in_file(fleet.check_keys({"enabled", "url", "heartbeat_ms", "lost_after_ms", "reconcile_ms",
                                               "max_unavailable", "swap_timeout_s"})));
  LG_RETURN_IF_ERROR(in_file(fleet.read("enabled", c.fleet_enabled)));
  if (c.fleet_enabled != "true" && c.fleet_enabled != "false" && c.fleet_enabled != "auto") {
    return Status::invalid_argument(source + ": fleet.enabled must be true, false or auto");
  }
  LG_RETURN_IF_ERROR(in_file(fleet.read("url", c.fleet_url)));
  LG_RETURN_IF_ERROR(in_file(fleet.read_range<int64_t>("heartbeat_ms", c.fleet_heartbeat_ms, 50, 60000)));
  LG_RETURN_IF_ERROR(in_file(fleet.read_range<int64_t>("lost_after_ms", c.fleet_lost_after_ms, 100, 600000)));
  LG_RETURN_IF_ERROR(in_file(fleet.read_range<int64_t>("reconcile_ms", c.fleet_reconcile_ms, 100, 600000)));
  LG_RETURN_IF_ERROR(in_file(fleet.read_range<int32_t>("max_unavailable", c.fleet_max_unavailable, 1, 1000)));
  LG_RETURN_IF_ERROR(in_file(fleet.read_range<int64_t>("swap_timeout_s", c.fleet_swap_timeout_s, 1, 86400)));
  if (c.fleet_lost_after_ms <= c.fleet_heartbeat_ms) {
    return Status::invalid_argument(source + ": fleet.lost_after_ms must be longer than fleet.heartbeat_ms");
  }

  const YAML::Node scenarios = top.child("scenarios");
  if (scenarios && !scenarios.IsNull()) {
    if (!scenarios.IsMap()) return Status::invalid_argument(source + ": scenarios must map a name to an adapter");
    for (const auto& kv : scenarios) {
      try {
        c.scenarios[kv.first.as<std::string>()] = kv.second.as<std::string>();
      } catch (const YAML::Exception&) {
        const std::string name = kv.first.IsScalar() ? kv.first.Scalar() : "?";
        return Status::invalid_argument(source + ": scenarios." + name + ": must be an adapter name");
      }
    }
  }

  const Section auth(top.child("auth"), "auth");
  LG_RETURN_IF_ERROR(in_file(auth.check_keys({"admin_token", "admin_token_env"})));
  LG_RETURN_IF_ERROR(in_file(auth.read("admin_token", c.admin_token)));
  LG_RETURN_IF_ERROR(in_file(auth.read("admin_token_env", c.admin_token_env)));

  const Section demo(top.child("demo"), "demo");
  LG_RETURN_IF_ERROR(in_file(demo.check_keys({"dir"})));
  LG_RETURN_IF_ERROR(in_file(demo.read("dir", c.demo_dir)));
  return c;
}

Result<ServeConfig> ServeConfig::load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return Status::not_found("cannot read config file " + path);
  std::stringstream text;
  text << in.rdbuf();
  return parse(text.str(), path);
}

int64_t ServeConfig::resolved_memory_budget_bytes() const {
  if (memory_budget_mib > 0) return memory_budget_mib << 20;
  const long pages = sysconf(_SC_PHYS_PAGES), page = sysconf(_SC_PAGE_SIZE);
  return pages > 0 && page > 0 ? static_cast<int64_t>(pages) * page / 10 * 8 : 0;
}

std::vector<std::string> ServeConfig::resolved_base_roots() const {
  if (!base_roots.empty() || model_path.empty()) return base_roots;
  std::filesystem::path dir = std::filesystem::absolute(model_path).lexically_normal();
  if (dir.filename().empty()) dir = dir.parent_path();  // "models/x/" names x too
  return {dir.parent_path().string()};
}

std::string ServeConfig::resolved_registry_path() const {
  if (!registry_path.empty()) return registry_path;
  const std::filesystem::path model = std::filesystem::absolute(model_path).lexically_normal();
  std::string name = served_model_name.empty() ? model.filename().string() : served_model_name;
  for (char& ch : name) {  // a folder name whatever the served name holds
    if (!std::isalnum(static_cast<unsigned char>(ch)) && ch != '-' && ch != '_' && ch != '.') ch = '_';
  }
  if (name.empty() || name == "." || name == "..") name = "model";
  const std::string tag = sha256_hex(model.string()).substr(0, 8);
  return ".cache/loragate/" + name + "-" + tag + "/registry.db";
}

std::string ServeConfig::resolved_training_dir() const {
  if (!training_dir.empty()) return training_dir;
  // A PostgreSQL registry (registry/registry.h: is_postgres_url) has no
  // directory to put them beside: the default cache directory then.
  if (registry_path.starts_with("postgresql://") || registry_path.starts_with("postgres://")) {
    return ".cache/loragate/trained";
  }
  const std::filesystem::path parent = std::filesystem::path(registry_path).parent_path();
  return (parent.empty() ? std::filesystem::path("trained") : parent / "trained").string();
}

bool ServeConfig::is_fleet_replica() const {
  if (fleet_enabled != "auto") return fleet_enabled == "true";
  return registry_path.rfind("postgresql://", 0) == 0 || registry_path.rfind("postgres://", 0) == 0;
}

std::string ServeConfig::resolved_admin_token() const {
  if (!admin_token.empty()) return admin_token;
  const char* env = admin_token_env.empty() ? nullptr : std::getenv(admin_token_env.c_str());
  return env != nullptr ? std::string(env) : std::string();
}

}  // namespace loragate
