// `loragate admin prefix-cache reset [--base NAME]`: drops the cached prompt
// prefixes of a running server (POST /admin/prefix_cache/reset), of every
// loaded base or of the one named, so that the requests that follow run cold.
#include <iostream>
#include <memory>
#include <string>

#include "cli/admin_client.h"
#include "cli/commands.h"

namespace loragate::cli {

void add_admin_group_command(CLI::App& app) {
  CLI::App* admin = app.add_subcommand("admin", "Operate a running server's engine state");
  admin->require_subcommand(1);
  CLI::App* cache = admin->add_subcommand("prefix-cache", "The prefix cache (KV blocks shared by equal prompt prefixes)");
  cache->require_subcommand(1);

  CLI::App* cmd = cache->add_subcommand("reset", "Drop every cached prefix (of one base with --base; default: all loaded bases)");
  auto o = add_admin_options(cmd);
  cmd->add_option("--base", o->base, "Base generation whose cache to reset (default: every loaded base)");
  cmd->callback([o] {
    run([&]() -> Status {
      LG_ASSIGN_OR_RETURN(nlohmann::json j, admin_call(*o, "POST", "/admin/prefix_cache/reset" + base_query(*o)));
      if (o->json) {
        std::cout << j.dump(2) << "\n";
        return Status::ok();
      }
      const std::string bases = cell(j, "reset");
      std::cout << (bases == "-" ? std::string("no base is loaded: nothing to reset")
                                 : "reset the prefix cache of " + bases)
                << "\n";
      return Status::ok();
    });
  });
}

}  // namespace loragate::cli
