// HttpServer: the listener and the lifecycle of the network side. Owns the
// io_context, its threads, the acceptor and (through the tracker) the live
// sessions; dispatches every request through a Router it does not own.
//
// start() binds and returns the port (0 in the options = ephemeral). stop()
// is graceful: stop accepting (new connections are refused), close idle
// keep-alive connections, let in-flight exchanges finish until the shutdown
// deadline, then close what is left and join the threads. The phases are
// public so an owner can act between them (the Gateway cancels engine
// requests before forcing connections closed). Public methods are called
// from one controlling thread; the router must outlive the server.
#pragma once

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/steady_timer.hpp>

#include "common/status.h"
#include "gateway/http/http_session.h"
#include "gateway/http/server_options.h"
#include "gateway/http/session_tracker.h"

namespace loragate {

class Router;

class HttpServer {
 public:
  // `on_request_done` runs once per request read (log + observer), on network threads.
  HttpServer(ServerOptions options, const Router* router, std::function<void(const RequestRecord&)> on_request_done);
  ~HttpServer();
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds, listens and starts the io threads; returns the bound port.
  Result<uint16_t> start();
  // All of stop_accepting(), wait_idle(now + shutdown_deadline), close_all(), join().
  void stop();

  // Closes the acceptor (new connections are refused) and asks every session
  // to close once its current exchange is answered.
  void stop_accepting();
  // Waits until every session closed or `deadline`; true when none is left.
  bool wait_idle(std::chrono::steady_clock::time_point deadline);
  // Closes every connection now; requests still in flight see their client go.
  void close_all();
  // Stops the io_context and joins its threads (idempotent).
  void join();

  bool started() const { return !threads_.empty(); }
  bool draining() const { return draining_.load(); }
  uint16_t port() const { return port_; }
  size_t connections() const { return tracker_.size(); }
  boost::asio::io_context& io_context() { return ioc_; }

 private:
  void do_accept();
  void on_accept(boost::beast::error_code ec, boost::asio::ip::tcp::socket socket);

  SessionTracker tracker_;  // outlives ioc_: sessions destroyed with it unregister here
  std::atomic<bool> draining_{false};
  std::shared_ptr<SessionContext> ctx_;
  boost::asio::io_context ioc_;
  std::optional<boost::asio::executor_work_guard<boost::asio::io_context::executor_type>> work_;
  boost::asio::ip::tcp::acceptor acceptor_;
  // After a failed accept (EMFILE: out of descriptors) the next waits, 10 ms
  // doubling to 1 s, so a full descriptor table is neither a hot loop nor a
  // log flood; a successful accept resets it. On the acceptor's strand.
  boost::asio::steady_timer accept_backoff_;
  std::chrono::milliseconds backoff_{0};
  int64_t accept_failures_ = 0;
  std::vector<std::thread> threads_;
  uint16_t port_ = 0;
};

}  // namespace loragate
