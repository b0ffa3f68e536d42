#include "gateway/http/http_server.h"

#include <pthread.h>

#include <cstdio>
#include <future>

#include <boost/asio/dispatch.hpp>
#include <boost/asio/ip/address.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core/bind_handler.hpp>

namespace loragate {

namespace beast = boost::beast;
namespace net = boost::asio;
using tcp = net::ip::tcp;

HttpServer::HttpServer(ServerOptions options, const Router* router,
                       std::function<void(const RequestRecord&)> on_request_done)
    : ctx_(std::make_shared<SessionContext>()),
      ioc_(std::max(1, options.io_threads)),
      acceptor_(net::make_strand(ioc_)),
      accept_backoff_(acceptor_.get_executor()) {
  ctx_->options = std::move(options);
  ctx_->router = router;
  ctx_->tracker = &tracker_;
  ctx_->draining = &draining_;
  ctx_->on_request_done = std::move(on_request_done);
}

HttpServer::~HttpServer() {
  if (started()) stop();
}

Result<uint16_t> HttpServer::start() {
  if (started()) return Status::invalid_argument("the server is already started");
  const ServerOptions& o = ctx_->options;
  if (o.io_threads <= 0) return Status::invalid_argument("server.io_threads must be > 0");
  const std::string where = o.host + ":" + std::to_string(o.port);
  beast::error_code ec;
  tcp::resolver resolver(ioc_);
  auto endpoints = resolver.resolve(o.host, std::to_string(o.port), tcp::resolver::passive, ec);
  if (ec || endpoints.empty()) return Status::invalid_argument("cannot resolve server.host " + where + ": " + ec.message());
  const tcp::endpoint endpoint = endpoints.begin()->endpoint();
  acceptor_.open(endpoint.protocol(), ec);
  if (ec) return Status::io_error("cannot open a socket for " + where + ": " + ec.message());
  acceptor_.set_option(net::socket_base::reuse_address(true), ec);
  if (ec) return Status::io_error("cannot set SO_REUSEADDR on " + where + ": " + ec.message());
  acceptor_.bind(endpoint, ec);
  if (ec) return Status::io_error("cannot bind " + where + ": " + ec.message());
  acceptor_.listen(net::socket_base::max_listen_connections, ec);
  if (ec) return Status::io_error("cannot listen on " + where + ": " + ec.message());
  port_ = acceptor_.local_endpoint(ec).port();
  work_.emplace(ioc_.get_executor());
  net::dispatch(acceptor_.get_executor(), [this] { do_accept(); });
  for (int i = 0; i < o.io_threads; ++i) {
    threads_.emplace_back([this] {
      pthread_setname_np(pthread_self(), "lg-io");  // for top -H and per-thread CPU accounting
      ioc_.run();
    });
  }
  return port_;
}

void HttpServer::do_accept() {
  acceptor_.async_accept(net::make_strand(ioc_), beast::bind_front_handler(&HttpServer::on_accept, this));
}

void HttpServer::on_accept(beast::error_code ec, tcp::socket socket) {
  if (!acceptor_.is_open() || ec == net::error::operation_aborted) return;
  if (ec) {
    // Once per doubling of the wait: at most about one line a second once it is at 1 s.
    ++accept_failures_;
    backoff_ = std::min(std::chrono::milliseconds(1000), std::max(std::chrono::milliseconds(10), backoff_ * 2));
    std::fprintf(stderr, "loragate: accept failed (%lld so far): %s; retrying in %lld ms\n",
                 static_cast<long long>(accept_failures_), ec.message().c_str(),
                 static_cast<long long>(backoff_.count()));
    accept_backoff_.expires_after(backoff_);
    accept_backoff_.async_wait([this](beast::error_code wait_ec) {
      if (!wait_ec && acceptor_.is_open()) do_accept();
    });
    return;
  }
  backoff_ = std::chrono::milliseconds(0);
  if (tracker_.size() >= static_cast<size_t>(std::max(0, ctx_->options.max_connections))) {
    beast::error_code ignored;
    socket.close(ignored);  // over the connection limit: refuse at once
  } else {
    // Tokens stream as small writes: without TCP_NODELAY, Nagle's algorithm
    // holds each one back for the previous ACK and bunches SSE events together.
    beast::error_code nodelay_ec;
    socket.set_option(tcp::no_delay(true), nodelay_ec);
    auto session = std::make_shared<HttpSession>(std::move(socket), ctx_);
    session->start(tracker_.add(session));
  }
  do_accept();
}

void HttpServer::stop_accepting() {
  if (!started() || draining_.exchange(true)) return;
  std::promise<void> closed;
  net::dispatch(acceptor_.get_executor(), [this, &closed] {
    beast::error_code ignored;
    acceptor_.close(ignored);
    accept_backoff_.cancel();
    closed.set_value();
  });
  closed.get_future().wait();
  for (auto& session : tracker_.live()) session->close_when_idle();
}

bool HttpServer::wait_idle(std::chrono::steady_clock::time_point deadline) {
  return tracker_.wait_empty_until(deadline);
}

void HttpServer::close_all() {
  for (auto& session : tracker_.live()) session->force_close();
}

void HttpServer::join() {
  if (threads_.empty()) return;
  work_.reset();
  ioc_.stop();
  for (std::thread& t : threads_) t.join();
  threads_.clear();
}

void HttpServer::stop() {
  if (!started()) return;
  stop_accepting();
  if (!wait_idle(std::chrono::steady_clock::now() + ctx_->options.shutdown_deadline)) {
    close_all();
    wait_idle(std::chrono::steady_clock::now() + std::chrono::seconds(1));
  }
  join();
}

}  // namespace loragate
