#include "gateway/http/peer_watch.h"

#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <cerrno>
#include <chrono>
#include <string_view>

#include <boost/asio/post.hpp>
#include <boost/asio/steady_timer.hpp>

namespace loragate {

namespace net = boost::asio;
using tcp = net::ip::tcp;

namespace {

constexpr std::chrono::milliseconds kPeerResetPoll{10};  // after a 100 Continue probe: how often to look for a reset

// Watches the socket while a handler works: readable with nothing to read
// means the client closed its end (or only its sending side). Bytes to read
// (a pipelined request) end the watch; the next write failing still notices
// a close. Readiness is edge-triggered (epoll): an edge that came before the
// wait was queued is lost, so every newly queued wait is followed by a look.
class SocketPeerWatch final : public PeerWatch {
 public:
  explicit SocketPeerWatch(tcp::socket& socket) : socket_(socket), reset_poll_(socket.get_executor()) {}

  void watch(std::shared_ptr<Host> host, uint64_t seq, unsigned http_version) override {
    seq_ = seq;
    http_version_ = http_version;
    arm(host);
    net::post(socket_.get_executor(), [this, host] { look(host); });
  }

  void cancel() override { reset_poll_.cancel(); }

 private:
  void arm(const std::shared_ptr<Host>& host) {
    if (armed_) return;  // one wait at a time: each newly armed one brings one look
    armed_ = true;
    socket_.async_wait(tcp::socket::wait_read, [this, host](boost::system::error_code ec) {
      armed_ = false;
      if (!ec) look(host);
    });
    net::post(socket_.get_executor(), [this, host] { look(host); });
  }

  void look(const std::shared_ptr<Host>& host) {
    if (!host->wants_watch()) return;
    // Readiness can be stale: peek to tell a close from nothing. 0 = a FIN;
    // EAGAIN = nothing after all; bytes = a pipelined request.
    char byte;
    const ssize_t n = ::recv(socket_.native_handle(), &byte, 1, MSG_PEEK | MSG_DONTWAIT);
    if (n > 0) return;
    if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK || errno == EINTR)) return arm(host);
    if (n == 0) return on_shut_send(host);
    host->peer_gone();  // reset, or another error
  }

  // A FIN: the client closed, or only shut its sending side and waits for the
  // answer. Data sent to a closed socket brings back a reset; a client that
  // still reads takes it. A stream's own writes do that; before any answer an
  // HTTP/1.1 client gets an interim 100 Continue (RFC 9110 §15.2: a client
  // must parse 1xx it did not expect), and the connection's TCP state is then
  // polled for that reset (at EOF the socket is readable for good: a wait
  // would not block, and recv reports the EOF before any reset). HTTP/1.0 has
  // no interim responses: that client is simply answered.
  void on_shut_send(const std::shared_ptr<Host>& host) {
    if (shut_send_) return;
    shut_send_ = true;
    host->peer_done_sending();
    if (!host->awaits_answer(seq_) || http_version_ < 11) return;
    // No answer started, so nothing is being written: this cannot interleave
    // with an async write, and fits an empty send buffer at once.
    static constexpr std::string_view kProbe = "HTTP/1.1 100 Continue\r\n\r\n";
    const ssize_t sent = ::send(socket_.native_handle(), kProbe.data(), kProbe.size(), MSG_DONTWAIT | MSG_NOSIGNAL);
    if (sent != static_cast<ssize_t>(kProbe.size())) return host->peer_gone();
    poll_for_reset(host, seq_);
  }

  void poll_for_reset(const std::shared_ptr<Host>& host, uint64_t seq) {
    reset_poll_.expires_after(kPeerResetPoll);
    reset_poll_.async_wait([this, host, seq](boost::system::error_code ec) {
      if (ec || !host->awaits_answer(seq)) return;
      tcp_info info{};
      socklen_t len = sizeof info;
      if (::getsockopt(socket_.native_handle(), IPPROTO_TCP, TCP_INFO, &info, &len) != 0 ||
          info.tcpi_state == TCP_CLOSE) {
        return host->peer_gone();
      }
      poll_for_reset(host, seq);
    });
  }

  tcp::socket& socket_;
  net::steady_timer reset_poll_;  // after a probe: looks for the reset of a client that is gone
  uint64_t seq_ = 0;              // the exchange watched
  unsigned http_version_ = 11;
  bool armed_ = false;            // an async_wait for readability is queued
  bool shut_send_ = false;        // a FIN came: nothing more to read
};

}  // namespace

std::unique_ptr<PeerWatch> make_socket_peer_watch(tcp::socket& socket) {
  return std::make_unique<SocketPeerWatch>(socket);
}

}  // namespace loragate
