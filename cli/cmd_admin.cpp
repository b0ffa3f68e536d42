// `loragate adapter add|rm|ls` and `loragate scenario set|rm|ls`: the admin
// API of a running server (/admin/adapters, /admin/scenarios). `scenario set
// --train FILE` also records the scenario's training set and recipe.
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <functional>
#include <iostream>
#include <memory>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "cli/train_flags.h"
#include "client/http_client.h"

namespace loragate::cli {

namespace {

using nlohmann::json;

// A relative path that exists here, made absolute: the server does not share
// our working directory.
std::string absolute_if_here(const std::string& path) {
  std::error_code ec;
  if (std::filesystem::path(path).is_relative() && std::filesystem::exists(path, ec)) {
    return std::filesystem::absolute(path, ec).lexically_normal().string();
  }
  return path;
}

void add_adapter_commands(CLI::App& app) {
  CLI::App* adapter = app.add_subcommand("adapter", "Register, remove and list a running server's LoRA adapters");
  adapter->require_subcommand(1);

  {
    CLI::App* cmd = adapter->add_subcommand("add", "Register an adapter (a PEFT directory the server can read)");
    auto o = add_admin_options(cmd);
    add_base_option(cmd, *o);
    auto name = std::make_shared<std::string>();
    auto path = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Adapter name")->required();
    cmd->add_option("PATH", *path, "Adapter directory, as the server sees it")->required();
    cmd->callback([o, name, path] {
      run([&]() -> Status {
        json body = {{"name", *name}, {"path", absolute_if_here(*path)}};
        if (!o->base.empty()) body["base"] = o->base;
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "POST", "/admin/adapters", body));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
          return Status::ok();
        }
        std::string sha = cell(j, "sha256");
        if (sha.size() > 12) sha = sha.substr(0, 12);
        std::cout << "added adapter '" << cell(j, "name") << "': rank " << cell(j, "rank") << ", alpha "
                  << cell(j, "alpha") << ", targets " << cell(j, "target_modules") << ", " << human_size(j)
                  << ", sha256 " << sha << ", base " << cell(j, "base_model") << "\n";
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = adapter->add_subcommand("rm", "Unregister an adapter");
    auto o = add_admin_options(cmd);
    add_base_option(cmd, *o);
    auto name = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Adapter name")->required();
    cmd->callback([o, name] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "DELETE", "/admin/adapters/" + client::url_encode_segment(*name) + base_query(*o)));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
        } else {
          std::cout << "removed adapter '" << *name << "'\n";
        }
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = adapter->add_subcommand("ls", "List registered adapters");
    auto o = add_admin_options(cmd);
    add_base_option(cmd, *o);
    cmd->callback([o] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "GET", "/admin/adapters" + base_query(*o)));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
          return Status::ok();
        }
        const json& data = list_data(j);
        if (data.empty()) {
          std::cout << "no adapters registered\n";
          return Status::ok();
        }
        std::vector<std::vector<std::string>> rows;
        std::vector<std::string> errors;
        for (const json& a : data) {
          rows.push_back({cell(a, "name"), cell(a, "rank"), cell(a, "alpha"), cell(a, "target_modules"),
                          cell(a, "cache_tier"), cell(a, "state"), cell(a, "requests"), human_size(a),
                          cell(a, "path")});
          if (a.is_object() && a.contains("load_error") && !a["load_error"].is_null()) {
            errors.push_back(cell(a, "name") + ": load error: " + cell(a, "load_error"));
          }
        }
        print_table({"NAME", "RANK", "ALPHA", "TARGETS", "TIER", "STATE", "REQUESTS", "SIZE", "PATH"}, rows);
        for (const std::string& e : errors) std::cout << e << "\n";
        return Status::ok();
      });
    });
  }
}

void add_scenario_commands(CLI::App& app) {
  CLI::App* scenario = app.add_subcommand("scenario", "Point named scenarios of a running server at adapters");
  scenario->require_subcommand(1);

  {
    CLI::App* cmd = scenario->add_subcommand("set", "Create or repoint a scenario");
    auto o = add_admin_options(cmd);
    add_base_option(cmd, *o);
    auto name = std::make_shared<std::string>();
    auto adapter = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Scenario name")->required();
    cmd->add_option("ADAPTER", *adapter, "Registered adapter the scenario uses")->required();
    auto train = std::make_shared<std::string>();
    cmd->add_option("--train", *train,
                    "The scenario's training set (JSONL the server can read, inside training.roots or "
                    "adapters.roots): what an upgrade retrains the adapter from");
    auto recipe = add_train_flags(cmd);
    cmd->callback([o, name, adapter, train, recipe] {
      run([&]() -> Status {
        json body = {{"adapter", *adapter}};
        if (!o->base.empty()) body["base"] = o->base;
        if (train->empty() && any_train_flag(*recipe)) {
          return Status::invalid_argument("the training flags describe a training set: give it with --train FILE");
        }
        if (!train->empty()) {
          LG_ASSIGN_OR_RETURN(json config, train_config_json(*recipe));
          body["train"] = {{"path", absolute_if_here(*train)}, {"config", config}};
        }
        LG_ASSIGN_OR_RETURN(json j,
                            admin_call(*o, "PUT", "/admin/scenarios/" + client::url_encode_segment(*name), body));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
        } else {
          std::cout << "scenario '" << cell(j, "name") << "' -> adapter '" << cell(j, "adapter") << "' (base "
                    << cell(j, "base_model") << ")\n";
          if (j.contains("train") && j["train"].is_object()) {
            const json& t = j["train"];
            const json config = t.value("config", json::object());
            std::cout << "  trains from " << cell(t, "path") << " (sha256 " << cell(t, "sha256").substr(0, 12)
                      << "): " << config.value("steps", 0) << " steps of batch " << config.value("batch", 0)
                      << ", rank " << config.value("lora", json::object()).value("rank", 0) << "\n";
          }
        }
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = scenario->add_subcommand("rm", "Remove a scenario");
    auto o = add_admin_options(cmd);
    add_base_option(cmd, *o);
    auto name = std::make_shared<std::string>();
    cmd->add_option("NAME", *name, "Scenario name")->required();
    cmd->callback([o, name] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j,
                            admin_call(*o, "DELETE", "/admin/scenarios/" + client::url_encode_segment(*name) + base_query(*o)));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
        } else {
          std::cout << "removed scenario '" << *name << "'\n";
        }
        return Status::ok();
      });
    });
  }
  {
    CLI::App* cmd = scenario->add_subcommand("ls", "List scenarios");
    auto o = add_admin_options(cmd);
    add_base_option(cmd, *o);
    cmd->callback([o] {
      run([&]() -> Status {
        LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "GET", "/admin/scenarios" + base_query(*o)));
        if (o->json) {
          std::cout << j.dump(2) << "\n";
          return Status::ok();
        }
        const json& data = list_data(j);
        if (data.empty()) {
          std::cout << "no scenarios\n";
          return Status::ok();
        }
        std::vector<std::vector<std::string>> rows;
        for (const json& s : data) {
          const bool trained = s.contains("train") && s["train"].is_object();
          rows.push_back({cell(s, "name"), cell(s, "adapter"), cell(s, "base_model"), human_time(s, "updated_at"),
                          trained ? cell(s["train"], "path") : "-"});
        }
        print_table({"NAME", "ADAPTER", "BASE", "UPDATED", "TRAINING SET"}, rows);
        return Status::ok();
      });
    });
  }
}

}  // namespace

void add_admin_commands(CLI::App& app) {
  add_adapter_commands(app);
  add_scenario_commands(app);
  add_base_commands(app);
  add_admin_group_command(app);
}

}  // namespace loragate::cli
