#include "gateway/http/router.h"

#include <algorithm>

#include "gateway/openai/openai_errors.h"

namespace loragate {

void Router::add(http::verb method, std::string path, RouteHandler handler) {
  routes_.push_back(Route{method, std::move(path), false, std::move(handler)});
}

void Router::add_prefix(http::verb method, std::string prefix, RouteHandler handler) {
  routes_.push_back(Route{method, std::move(prefix), true, std::move(handler)});
}

std::string_view Router::path_of(std::string_view target) {
  const size_t q = target.find_first_of("?#");
  return q == std::string_view::npos ? target : target.substr(0, q);
}

bool Router::matches(const Route& r, std::string_view path) const {
  return r.prefix ? path.substr(0, r.pattern.size()) == r.pattern : path == r.pattern;
}

void Router::dispatch(const std::shared_ptr<Exchange>& exchange) const {
  const std::string_view path = path_of(exchange->request().target());
  const http::verb method = exchange->request().method();
  // The best route for this method and path: exact first, then the longest prefix.
  const Route* best = nullptr;
  std::string allow;  // methods of every route matching the path, for a 405
  for (const Route& r : routes_) {
    if (!matches(r, path)) continue;
    const std::string name(http::to_string(r.method));
    if (allow.find(name) == std::string::npos) allow += (allow.empty() ? "" : ", ") + name;
    if (r.method != method) continue;
    if (best == nullptr || (best->prefix && !r.prefix) ||
        (best->prefix == r.prefix && r.pattern.size() > best->pattern.size())) {
      best = &r;
    }
  }
  if (best != nullptr) {
    exchange->record().route = best->pattern;
    best->handler(exchange);
    return;
  }
  if (allow.empty()) {
    exchange->respond(error_response(http::status::not_found,
                                     "no route for " + std::string(path) +
                                         " (see GET /v1/models, POST /v1/completions, POST /v1/chat/completions)",
                                     "", "not_found"));
    return;
  }
  HttpResponse res = error_response(http::status::method_not_allowed,
                                    std::string(http::to_string(method)) + " is not allowed on " + std::string(path) +
                                        "; allowed: " + allow,
                                    "", "method_not_allowed");
  res.set(http::field::allow, allow);
  exchange->respond(std::move(res));
}

}  // namespace loragate
