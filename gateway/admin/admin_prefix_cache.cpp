// The prefix-cache route of AdminApi (admin_api.h): POST
// /admin/prefix_cache/reset drops every cached prompt prefix of one loaded
// base (body {"base": NAME}, ?base=NAME or X-Base) or of every loaded base,
// so that the requests that follow are computed cold — after an operator
// changed something the cache keys do not cover, or to measure cold latency.
// Requests running keep their blocks. A reset is a flag the engine loop
// takes before it admits its next arrivals, so it is cheap and stays on the
// strand; a request sent after the answer never reads an older prefix.
#include "gateway/admin/admin_api.h"
#include "gateway/admin/admin_request.h"

namespace loragate {

void AdminApi::install_prefix_cache(Router& router, const AdminGate& gate) {
  router.add(http::verb::post, "/admin/prefix_cache/reset", gate.guard([this](const std::shared_ptr<Exchange>& ex) {
    nlohmann::json body;
    if (auto e = parse_object(ex->request(), &body, /*empty_ok=*/true)) return ex->respond(e->to_response());
    std::string name;
    if (auto e = optional_string(body, "base", &name)) return ex->respond(e->to_response());
    if (name.empty()) name = named_base(ex->request(), nlohmann::json::object());  // ?base=, else X-Base

    std::vector<std::shared_ptr<ServingBase>> targets;
    if (!name.empty()) {
      ex->record().base = name;
      Result<std::shared_ptr<ServingBase>> found = bases_->find(name);
      if (!found.is_ok()) return ex->respond(status_response(found.status()));
      targets.push_back(std::move(found).value());
    } else {
      // Every loaded base; one still loading has nothing cached, one failed has no engine.
      for (const BaseStatus& b : bases_->list()) {
        if (auto found = bases_->find(b.name); found.is_ok()) targets.push_back(std::move(found).value());
      }
    }
    nlohmann::json reset = nlohmann::json::array();
    for (const std::shared_ptr<ServingBase>& base : targets) {
      base->loop().reset_prefix_cache();
      reset.push_back(base->name());
    }
    ex->respond(json_response(http::status::ok, {{"reset", std::move(reset)}}));
  }));
}

}  // namespace loragate
