// `loragate base add|ls|promote|rollback|rm`: the base generations of a
// running server (/admin/bases): load a candidate beside the serving base,
// watch it load, promote it, roll back, unload.
#include <chrono>
#include <filesystem>
#include <iostream>
#include <memory>
#include <string>
#include <thread>

#include "cli/admin_client.h"
#include "cli/commands.h"
#include "client/http_client.h"

namespace loragate::cli {
namespace {

using nlohmann::json;

std::string short_sha(const json& b) {
  std::string sha = cell(b, "sha256");
  return sha.size() > 12 ? sha.substr(0, 12) : sha;
}

void print_swap(const json& s) {
  std::cout << cell(s, "kind") << ": '" << cell(s, "from") << "' -> '" << cell(s, "to") << "' by " << cell(s, "actor")
            << (s.value("forced", false) ? " (forced: " + cell(s, "note") + ")" : "") << "\n";
}

// Polls GET /admin/bases until `name` is no longer loading; its last status.
Result<json> wait_loaded(const AdminOptions& o, const std::string& name) {
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::duration<double>(o.timeout_s);
  for (;;) {
    LG_ASSIGN_OR_RETURN(json j, admin_call(o, "GET", "/admin/bases"));
    for (const json& b : list_data(j)) {
      if (cell(b, "name") == name && cell(b, "state") != "loading") return b;
    }
    if (std::chrono::steady_clock::now() > deadline) {
      return Status::resource_exhausted("base '" + name + "' is still loading after " + std::to_string(o.timeout_s) +
                                        " s (see loragate base ls)");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
}

void add_add(CLI::App* base) {
  CLI::App* cmd = base->add_subcommand("add", "Load a candidate base beside the serving one (waits until it is loaded)");
  auto o = add_admin_options(cmd);
  auto name = std::make_shared<std::string>();
  auto path = std::make_shared<std::string>();
  auto dtype = std::make_shared<std::string>("f32");
  auto no_wait = std::make_shared<bool>(false);
  cmd->add_option("NAME", *name, "Base name (its registry key and the first part of system_fingerprint)")->required();
  cmd->add_option("PATH", *path, "Hugging Face model directory, as the server sees it")->required();
  cmd->add_option("--dtype", *dtype, "Weight storage: f32, bf16, int8, int8-outlier, int4, int4-g64, int4-asym or int4-asym-g64");
  cmd->add_flag("--no-wait", *no_wait, "Return once the load has started");
  cmd->callback([o, name, path, dtype, no_wait] {
    run([&]() -> Status {
      std::string p = *path;
      std::error_code ec;
      if (std::filesystem::path(p).is_relative() && std::filesystem::exists(p, ec)) {
        p = std::filesystem::absolute(p, ec).lexically_normal().string();
      }
      LG_ASSIGN_OR_RETURN(json started,
                          admin_call(*o, "POST", "/admin/bases", {{"name", *name}, {"path", p}, {"dtype", *dtype}}));
      json j = started;
      if (!*no_wait) {
        LG_ASSIGN_OR_RETURN(j, wait_loaded(*o, *name));
      }
      if (o->json) {
        std::cout << j.dump(2) << "\n";
      } else if (cell(j, "state") == "failed") {
        return Status::invalid_argument("base '" + *name + "' failed to load: " + cell(j, "error"));
      } else {
        std::cout << "base '" << *name << "' " << cell(j, "state") << " (" << cell(j, "dtype") << ", weights "
                  << human_size(j, "weights_bytes") << ", KV " << human_size(j, "kv_bytes") << ", sha256 "
                  << short_sha(j) << ")\n";
      }
      return Status::ok();
    });
  });
}

void add_ls(CLI::App* base) {
  CLI::App* cmd = base->add_subcommand("ls", "List the base generations and the recent swaps");
  auto o = add_admin_options(cmd);
  cmd->callback([o] {
    run([&]() -> Status {
      LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "GET", "/admin/bases"));
      if (o->json) {
        std::cout << j.dump(2) << "\n";
        return Status::ok();
      }
      std::vector<std::vector<std::string>> rows;
      for (const json& b : list_data(j)) {
        rows.push_back({cell(b, "name"), cell(b, "state"), cell(b, "dtype"), short_sha(b), human_size(b, "weights_bytes"),
                        human_size(b, "kv_bytes"), std::to_string(b.value("adapters", json::array()).size()),
                        cell(b, "requests_in_flight"), cell(b, "path")});
      }
      print_table({"NAME", "STATE", "DTYPE", "SHA256", "WEIGHTS", "KV", "ADAPTERS", "IN FLIGHT", "PATH"}, rows);
      for (const json& b : list_data(j)) {
        if (b.contains("error")) std::cout << cell(b, "name") << ": " << cell(b, "error") << "\n";
      }
      if (j.contains("swaps") && !j["swaps"].empty()) {
        std::cout << "last swap: ";
        print_swap(j["swaps"][0]);
      }
      return Status::ok();
    });
  });
}

void add_promote(CLI::App* base) {
  CLI::App* cmd = base->add_subcommand("promote", "Make a candidate base serve every adapter name and scenario");
  auto o = add_admin_options(cmd);
  auto name = std::make_shared<std::string>();
  auto force = std::make_shared<bool>(false);
  cmd->add_option("NAME", *name, "The candidate base")->required();
  cmd->add_flag("--force", *force, "Promote even when adapters or scenarios of the serving base have no version on it");
  cmd->callback([o, name, force] {
    run([&]() -> Status {
      json body = {{"force", *force}, {"by", env_actor()}};
      LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "POST", "/admin/bases/" + client::url_encode_segment(*name) + "/promote",
                                             body));
      if (o->json) {
        std::cout << j.dump(2) << "\n";
      } else {
        print_swap(j);
      }
      return Status::ok();
    });
  });
}

void add_rollback(CLI::App* base) {
  CLI::App* cmd = base->add_subcommand("rollback", "Make the previous base serve again");
  auto o = add_admin_options(cmd);
  cmd->callback([o] {
    run([&]() -> Status {
      LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "POST", "/admin/bases/rollback", {{"by", env_actor()}}));
      if (o->json) {
        std::cout << j.dump(2) << "\n";
      } else {
        print_swap(j);
      }
      return Status::ok();
    });
  });
}

void add_rm(CLI::App* base) {
  CLI::App* cmd = base->add_subcommand("rm", "Unload a base that does not serve (frees its memory)");
  auto o = add_admin_options(cmd);
  auto name = std::make_shared<std::string>();
  cmd->add_option("NAME", *name, "Base name")->required();
  cmd->callback([o, name] {
    run([&]() -> Status {
      LG_ASSIGN_OR_RETURN(json j, admin_call(*o, "DELETE", "/admin/bases/" + client::url_encode_segment(*name)));
      if (o->json) {
        std::cout << j.dump(2) << "\n";
      } else {
        std::cout << "removed base '" << *name << "'\n";
      }
      return Status::ok();
    });
  });
}

}  // namespace

void add_base_commands(CLI::App& app) {
  CLI::App* base = app.add_subcommand("base", "Load, promote, roll back and remove a running server's base models");
  base->require_subcommand(1);
  add_add(base);
  add_ls(base);
  add_promote(base);
  add_rollback(base);
  add_rm(base);
}

}  // namespace loragate::cli
