// A tiny blocking HTTP server for the client tests: one thread accepts on
// 127.0.0.1 (any free port), one thread per connection reads requests with
// Beast and hands each to a handler, which writes whatever bytes it likes
// (whole responses, hand-cut chunks, nothing at all).
#pragma once

#include <sys/socket.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <boost/asio/connect.hpp>
#include <boost/asio/io_context.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/core/flat_buffer.hpp>
#include <boost/beast/http.hpp>

namespace loragate::testing {

namespace tiny {
namespace asio = boost::asio;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;
using Request = http::request<http::string_body>;
}  // namespace tiny

class TinyServer {
 public:
  // Returns false to close the connection after answering.
  using Handler = std::function<bool(const tiny::Request&, tiny::tcp::socket&)>;

  explicit TinyServer(Handler handler)
      : handler_(std::move(handler)), acceptor_(ioc_, {boost::asio::ip::make_address("127.0.0.1"), 0}) {
    port_ = acceptor_.local_endpoint().port();
    accept_thread_ = std::thread([this] { accept_loop(); });
  }

  ~TinyServer() {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    {  // wake the blocked accept()
      boost::system::error_code ec;
      tiny::tcp::socket s(ioc_);
      s.connect({boost::asio::ip::make_address("127.0.0.1"), port_}, ec);
    }
    accept_thread_.join();
    for (auto& s : sockets_) ::shutdown(s->native_handle(), SHUT_RDWR);
    for (auto& t : sessions_) t.join();
  }

  uint16_t port() const { return port_; }
  std::string url() const { return "http://127.0.0.1:" + std::to_string(port_); }
  int connections() const { return connections_.load(); }
  int max_open() const { return max_open_.load(); }
  int requests() const { return requests_.load(); }

  // Sleeps until the server stops or `max` passes; true when stopping.
  bool wait_stop(std::chrono::milliseconds max) {
    std::unique_lock<std::mutex> lock(mu_);
    return cv_.wait_for(lock, max, [this] { return stop_; });
  }

  // --- helpers for handlers ---

  // False once the peer has gone.
  static bool write_raw(tiny::tcp::socket& s, std::string_view bytes) {
    boost::system::error_code ec;
    boost::asio::write(s, boost::asio::buffer(bytes.data(), bytes.size()), ec);
    return !ec;
  }

  static void respond(tiny::tcp::socket& s, int status, std::string body,
                      std::string content_type = "application/json", bool close = false) {
    tiny::http::response<tiny::http::string_body> res{static_cast<tiny::http::status>(status), 11};
    res.set(tiny::http::field::content_type, content_type);
    res.keep_alive(!close);
    res.body() = std::move(body);
    res.prepare_payload();
    boost::system::error_code ec;
    tiny::http::write(s, res, ec);
  }

  // The head of a chunked text/event-stream response.
  static std::string sse_head() {
    return "HTTP/1.1 200 OK\r\nContent-Type: text/event-stream\r\nCache-Control: no-cache\r\n"
           "Transfer-Encoding: chunked\r\n\r\n";
  }

  // One HTTP chunk carrying `data`; chunk("") is the last chunk.
  static std::string chunk(std::string_view data) {
    char size[32];
    std::snprintf(size, sizeof(size), "%zx\r\n", data.size());
    if (data.empty()) return std::string(size) + "\r\n";
    return std::string(size) + std::string(data) + "\r\n";
  }

 private:
  void accept_loop() {
    for (;;) {
      auto sock = std::make_shared<tiny::tcp::socket>(ioc_);
      boost::system::error_code ec;
      acceptor_.accept(*sock, ec);
      {
        std::lock_guard<std::mutex> lock(mu_);
        if (stop_) return;
      }
      if (ec) continue;
      sock->set_option(tiny::tcp::no_delay(true), ec);  // small SSE chunks go out as written
      ++connections_;
      sockets_.push_back(sock);
      sessions_.emplace_back([this, sock] { session(*sock); });
    }
  }

  void session(tiny::tcp::socket& sock) {
    const int open = ++open_;
    int seen = max_open_.load();
    while (seen < open && !max_open_.compare_exchange_weak(seen, open)) {
    }
    boost::beast::flat_buffer buffer;
    for (;;) {
      tiny::Request req;
      boost::system::error_code ec;
      tiny::http::read(sock, buffer, req, ec);
      if (ec) break;
      ++requests_;
      if (!handler_(req, sock)) break;
      if (!req.keep_alive()) break;
    }
    --open_;
    boost::system::error_code ec;
    sock.shutdown(tiny::tcp::socket::shutdown_both, ec);
  }

  Handler handler_;
  boost::asio::io_context ioc_;
  tiny::tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread accept_thread_;
  std::vector<std::shared_ptr<tiny::tcp::socket>> sockets_;
  std::vector<std::thread> sessions_;
  std::mutex mu_;
  std::condition_variable cv_;
  bool stop_ = false;
  std::atomic<int> connections_{0};
  std::atomic<int> open_{0};
  std::atomic<int> max_open_{0};
  std::atomic<int> requests_{0};
};

}  // namespace loragate::testing
