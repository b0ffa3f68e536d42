// The scenario routes of AdminApi (admin_api.h): PUT/DELETE/GET
// /admin/scenarios, and GET /admin/scenarios/{name}.
//
// A scenario owns its training data: PUT with `train: {path, config?}`
// records the JSONL file (resolved inside training.roots or adapters.roots,
// hashed now) and the training config (trainer/train_config.h; absent keys
// take the fixtures' recipe) that an upgrade retrains its adapter with on a
// candidate base. The record belongs to the scenario's name, so every base's
// scenario of that name shows it.
#include <filesystem>
#include <map>

#include "common/path_roots.h"
#include "common/sha256.h"
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"
#include "trainer/train_config.h"

namespace loragate {
namespace {

using nlohmann::json;

json training_json(const TrainingSetRecord& t) {
  json config = json::parse(t.config, nullptr, /*allow_exceptions=*/false);
  return {{"path", t.path}, {"sha256", t.sha256}, {"config", config.is_discarded() ? json() : config},
          {"updated_at", t.updated_at}};
}

json scenario_json(const ScenarioRecord& r, const std::map<std::string, TrainingSetRecord>& training) {
  json j = {{"name", r.name}, {"base_model", r.base_model}, {"adapter", r.adapter},
            {"created_at", r.created_at}, {"updated_at", r.updated_at}};
  auto it = training.find(r.name);
  j["train"] = it == training.end() ? json() : training_json(it->second);
  return j;
}

// What PUT's `train` asked for, checked on the strand (shape only).
struct TrainRequest {
  bool given = false;
  std::string path;
  json config = json::object();
};

std::optional<ApiError> parse_train(const json& body, TrainRequest* out) {
  auto it = body.find("train");
  if (it == body.end() || it->is_null()) return std::nullopt;
  if (!it->is_object()) return bad_request("train must be an object {path, config?}", "train");
  for (const auto& [key, value] : it->items()) {
    if (key != "path" && key != "config") {
      return bad_request("train: unknown key '" + key + "' (known: path, config)", "train");
    }
  }
  out->given = true;
  if (auto e = string_field(*it, "path", &out->path)) return bad_request("train." + e->message, "train.path");
  if (auto c = it->find("config"); c != it->end() && !c->is_null()) {
    if (!c->is_object()) return bad_request("train.config must be an object (a training config)", "train.config");
    out->config = *c;
  }
  return std::nullopt;
}

}  // namespace

Result<TrainingSetRecord> AdminApi::training_set_for(const std::string& scenario, const std::string& path,
                                                     const json& config) const {
  // Refused before the file is touched: the config is the client's, the file the server's.
  Result<train::TrainConfig> parsed = train::train_config_from_json(config);
  if (!parsed.is_ok()) return Status::invalid_argument("train.config: " + parsed.status().message());
  std::vector<std::string> roots = options_.training_roots;
  roots.insert(roots.end(), options_.adapter_roots.begin(), options_.adapter_roots.end());
  LG_ASSIGN_OR_RETURN(std::string real,
                      resolve_inside_roots(path, roots, "training set", "training.roots or adapters.roots"));
  std::error_code ec;
  // A FIFO or device would block the hash: only a regular file is data.
  if (!std::filesystem::is_regular_file(real, ec)) {
    return Status::invalid_argument("training set path '" + path + "' is not a regular file");
  }
  LG_ASSIGN_OR_RETURN(std::string sha256, sha256_file(real));
  TrainingSetRecord record;
  record.scenario = scenario;
  record.path = real;
  record.sha256 = sha256;
  record.config = train::to_json(*parsed).dump();  // every key, so the record says what an upgrade will do
  return record;
}

void AdminApi::install_scenarios(Router& router, const AdminGate& gate) {
  router.add_prefix(http::verb::put, "/admin/scenarios/", gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
    const std::string name = tail_after(ex->request(), "/admin/scenarios/");
    json body;
    std::string adapter;
    TrainRequest train;
    if (auto e = parse_object(ex->request(), &body)) return ex->respond(e->to_response());
    if (auto e = string_field(body, "adapter", &adapter)) return ex->respond(e->to_response());
    if (auto e = parse_train(body, &train)) return ex->respond(e->to_response());
    gate.answer_off_strand(ex, [this, name, adapter, train, base_name = named_base(ex->request(), body)] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      std::optional<TrainingSetRecord> training;
      if (train.given) {  // checked before anything is written
        Status named = validate_name("scenario name", name, /*allow_slash=*/false);
        if (!named.is_ok()) return status_response(named);
        Result<TrainingSetRecord> t = training_set_for(name, train.path, train.config);
        if (!t.is_ok()) return status_response(t.status());
        training = std::move(t).value();
      }
      Result<ScenarioRecord> r = registry_->set_scenario(name, (*base)->name(), adapter);
      routes_changed();
      if (!r.is_ok()) return status_response(r.status());
      std::map<std::string, TrainingSetRecord> trained;
      Result<TrainingSetRecord> stored =
          training ? registry_->set_training_set(*training) : registry_->get_training_set(name);
      if (stored.is_ok()) {
        trained[name] = *stored;
      } else if (training || stored.status().code() != StatusCode::kNotFound) {
        return status_response(stored.status());
      }
      return json_response(http::status::ok, scenario_json(*r, trained));
    });
  }));
  router.add_prefix(http::verb::delete_, "/admin/scenarios/",
                    gate.guard([this, gate](const std::shared_ptr<Exchange>& ex) {
                      gate.answer_off_strand(ex, [this, name = tail_after(ex->request(), "/admin/scenarios/"),
                                                  base_name = named_base(ex->request(), json::object())] {
                        Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
                        if (!base.is_ok()) return status_response(base.status());
                        Status s = registry_->remove_scenario(name, (*base)->name());
                        routes_changed();
                        if (!s.is_ok()) return status_response(s);
                        return json_response(http::status::ok, {{"name", name}, {"removed", true}});
                      });
                    }));
  // The listing, or with a name the one scenario; both with their training sets.
  auto describe = [this, gate](const std::shared_ptr<Exchange>& ex, const std::string& only) {
    gate.answer_off_strand(ex, [this, only, base_name = named_base(ex->request(), json::object())] {
      Result<std::shared_ptr<ServingBase>> base = base_named(base_name);
      if (!base.is_ok()) return status_response(base.status());
      Result<std::vector<ScenarioRecord>> records = registry_->list_scenarios((*base)->name());
      if (!records.is_ok()) return status_response(records.status());
      Result<std::vector<TrainingSetRecord>> sets = registry_->list_training_sets();
      if (!sets.is_ok()) return status_response(sets.status());
      std::map<std::string, TrainingSetRecord> training;
      for (TrainingSetRecord& t : *sets) training[t.scenario] = std::move(t);
      json data = json::array();
      for (const ScenarioRecord& r : *records) {
        if (!only.empty() && r.name == only) return json_response(http::status::ok, scenario_json(r, training));
        if (only.empty()) data.push_back(scenario_json(r, training));
      }
      if (!only.empty()) {
        return status_response(
            Status::not_found("scenario '" + only + "' not found on base model '" + (*base)->name() + "'"));
      }
      return json_response(http::status::ok, {{"object", "list"}, {"base", (*base)->name()}, {"data", data}});
    });
  };
  router.add(http::verb::get, "/admin/scenarios",
             gate.guard([describe](const std::shared_ptr<Exchange>& ex) { describe(ex, ""); }));
  router.add_prefix(http::verb::get, "/admin/scenarios/", gate.guard([describe](const std::shared_ptr<Exchange>& ex) {
    const std::string name = tail_after(ex->request(), "/admin/scenarios/");
    if (name.empty()) return ex->respond(bad_request("name a scenario: GET /admin/scenarios/{name}").to_response());
    describe(ex, name);
  }));
}

}  // namespace loragate
