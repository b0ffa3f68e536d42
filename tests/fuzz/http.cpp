// HTTP request parsing and routing, as HttpSession does it: a fresh Beast
// request_parser per message with the server's body and header limits,
// pipelined requests read from what is left in the buffer, each parsed
// request dispatched by a Router holding the gateway's and admin API's route
// table with stub handlers (no engine). Framing the parser accepts but the
// session refuses (check_request_framing) ends the connection as there. Admin stubs check the bearer token;
// the OpenAI stubs parse the JSON body and its shared fields.
//
// Input: byte 0 picks how many bytes arrive per read (so requests are cut
// anywhere) and whether small limits are used (to reach the 413/431 paths);
// the rest is what the client sends.
#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <exception>
#include <functional>
#include <memory>
#include <optional>
#include <string>

#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http/error.hpp>
#include <boost/beast/http/parser.hpp>

#include "gateway/admin/admin_auth.h"
#include "gateway/http/request_framing.h"
#include "gateway/http/router.h"
#include "gateway/http/server_options.h"
#include "gateway/openai/openai_errors.h"
#include "gateway/openai/request_fields.h"

namespace {

using namespace loragate;
namespace beast = boost::beast;

class StubExchange final : public Exchange {
 public:
  using Exchange::Exchange;
  void post(std::function<void()> fn) override { fn(); }
  void respond(HttpResponse response) override {
    if (answered_) __builtin_trap();  // answered exactly once
    answered_ = true;
    response.version(request().version());
    response.keep_alive(request().keep_alive());
    response.set(http::field::server, "loragate");
    response.prepare_payload();
  }
  void start_stream(http::status, std::string_view) override { answered_ = true; }
  void send_chunk(std::string) override {}
  void end_stream() override {}
  bool client_gone() const override { return false; }
  void on_client_gone(std::function<void()>) override {}
  bool answered() const { return answered_; }

 private:
  bool answered_ = false;
};

const std::string kToken = "fuzz-admin-token";

void ok(const std::shared_ptr<Exchange>& ex) { ex->respond(json_response(http::status::ok, {{"ok", true}})); }

void openai_stub(const std::shared_ptr<Exchange>& ex, bool chat) {
  nlohmann::json body;
  CommonFields fields;
  if (auto err = parse_json_object(ex->request().body(), &body)) return ex->respond(err->to_response());
  if (auto err = read_common_fields(body, chat, &fields)) return ex->respond(err->to_response());
  ok(ex);
}

void admin_stub(const std::shared_ptr<Exchange>& ex) {
  if (auto denied = check_admin_token(ex->request(), kToken)) return ex->respond(denied->to_response());
  ok(ex);
}

const Router& router() {
  static const Router* r = [] {
    auto* router = new Router;
    using v = http::verb;
    router->add(v::post, "/v1/completions", [](const auto& ex) { openai_stub(ex, false); });
    router->add(v::post, "/v1/chat/completions", [](const auto& ex) { openai_stub(ex, true); });
    router->add(v::get, "/v1/models", ok);
    router->add(v::get, "/health", ok);
    router->add(v::get, "/ready", ok);
    router->add(v::get, "/metrics", ok);
    for (const char* exact : {"/admin/adapters", "/admin/bases", "/admin/bases/rollback", "/admin/evaluations",
                              "/v1/load_lora_adapter", "/v1/unload_lora_adapter"}) {
      router->add(v::post, exact, admin_stub);
    }
    for (const char* exact : {"/admin/adapters", "/admin/scenarios", "/admin/bases", "/admin/evaluations"}) {
      router->add(v::get, exact, admin_stub);
    }
    router->add_prefix(v::delete_, "/admin/adapters/", admin_stub);
    router->add_prefix(v::put, "/admin/scenarios/", admin_stub);
    router->add_prefix(v::delete_, "/admin/scenarios/", admin_stub);
    router->add_prefix(v::delete_, "/admin/bases/", admin_stub);
    router->add_prefix(v::post, "/admin/bases/", admin_stub);
    router->add_prefix(v::get, "/admin/bases/", admin_stub);
    router->add_prefix(v::get, "/admin/evaluations/", admin_stub);
    return router;
  }();
  return *r;
}

bool is_parse_error(const beast::error_code& ec) {
  return ec.category() == beast::http::make_error_code(http::error::bad_target).category();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const uint8_t control = data[0];
  const std::string_view input(reinterpret_cast<const char*>(data) + 1, size - 1);
  const size_t chunk = (control & 0x0f) == 0 ? 4096 : (size_t{1} << ((control & 0x0f) - 1));
  ServerOptions options;
  if (control & 0x10) {
    options.max_body_bytes = 64;
    options.max_header_bytes = 256;
  }

  beast::flat_buffer buffer;
  size_t fed = 0;
  for (int message = 0; message < 16; ++message) {
    std::optional<http::request_parser<http::string_body>> parser;
    parser.emplace();
    parser->body_limit(options.max_body_bytes);
    parser->header_limit(options.max_header_bytes);
    beast::error_code ec;
    bool framing_checked = false;
    // What http::read does: put() what is buffered, read more on need_more, EOF at the end.
    while (!parser->is_done()) {
      if (buffer.size() > 0) {
        const size_t used = parser->put(buffer.data(), ec);
        buffer.consume(used);
        // The session checks the framing once the header is in, before the body.
        if (!framing_checked && parser->is_header_done()) {
          framing_checked = true;
          if (auto bad = check_request_framing(parser->get())) {
            (void)bad->to_response();
            return 0;
          }
        }
        if (ec == http::error::need_more) {
          ec = {};
        } else if (ec) {
          break;
        } else if (used > 0) {
          continue;
        }
      }
      if (fed == input.size()) {
        if (parser->got_some()) {
          parser->put_eof(ec);
        } else {
          ec = http::error::end_of_stream;
        }
        if (!ec && !parser->is_done()) ec = http::error::partial_message;
        break;
      }
      const size_t n = std::min(chunk, input.size() - fed);
      auto dst = buffer.prepare(n);
      std::memcpy(dst.data(), input.data() + fed, n);
      buffer.commit(n);
      fed += n;
    }
    // The session's answers to a request that could not be read.
    if (ec == http::error::body_limit || ec == http::error::header_limit) {
      (void)error_response(http::status::payload_too_large, "limit");
      return 0;
    }
    if (ec && is_parse_error(ec)) {
      if (parser->is_header_done()) (void)Router::path_of(parser->get().target());
      (void)error_response(http::status::bad_request, "malformed HTTP request: " + ec.message());
      return 0;
    }
    if (ec) return 0;

    HttpRequest request = parser->release();
    RequestRecord record;
    record.method = std::string(request.method_string());
    record.path = std::string(Router::path_of(request.target()));
    const bool keep_alive = request.keep_alive();
    auto exchange = std::make_shared<StubExchange>(std::move(request), std::move(record));
    try {
      router().dispatch(exchange);
    } catch (const std::exception&) {  // the session answers 500
    }
    if (!exchange->answered()) __builtin_trap();  // every route answers
    if (!keep_alive) return 0;
  }
  return 0;
}
