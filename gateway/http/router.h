// Router: dispatches an Exchange to the handler registered for its method and
// path. Unknown paths get a 404 and known paths with another method a 405
// (with an Allow header), both as OpenAI-shaped JSON errors.
//
// Routes are added before the server starts; dispatch() is then const and
// safe from any number of network threads at once.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <boost/beast/http/verb.hpp>

#include "gateway/http/http_exchange.h"

namespace loragate {

using RouteHandler = std::function<void(const std::shared_ptr<Exchange>&)>;

class Router {
 public:
  // Handles `method` on exactly `path` ("/v1/models").
  void add(http::verb method, std::string path, RouteHandler handler);
  // Handles `method` on every path starting with `prefix` ("/admin/adapters/").
  // Exact routes win over prefixes; a longer prefix wins over a shorter one.
  void add_prefix(http::verb method, std::string prefix, RouteHandler handler);

  // Runs the matching handler on the caller's strand, or answers 404/405.
  // Sets record().route to the matched pattern.
  void dispatch(const std::shared_ptr<Exchange>& exchange) const;

  // The path part of a request target: "/v1/models?x=1" -> "/v1/models".
  static std::string_view path_of(std::string_view target);

 private:
  struct Route {
    http::verb method;
    std::string pattern;
    bool prefix;
    RouteHandler handler;
  };
  bool matches(const Route& r, std::string_view path) const;

  std::vector<Route> routes_;
};

}  // namespace loragate
