#include "tests/gateway/raw_client.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>

namespace loragate::testing {

RawClient::RawClient(uint16_t port, RawClientOptions options) {
  fd_ = ::socket(AF_INET, SOCK_STREAM, 0);
  if (fd_ < 0) return;
  if (options.receive_buffer > 0) {
    ::setsockopt(fd_, SOL_SOCKET, SO_RCVBUF, &options.receive_buffer, sizeof options.receive_buffer);
  }
  if (options.max_segment > 0) {
    ::setsockopt(fd_, IPPROTO_TCP, TCP_MAXSEG, &options.max_segment, sizeof options.max_segment);
  }
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_port = htons(port);
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (::connect(fd_, reinterpret_cast<const sockaddr*>(&addr), sizeof addr) != 0) close();
}

RawClient::~RawClient() { close(); }

bool RawClient::send_all(const std::string& bytes) {
  size_t sent = 0;
  while (fd_ >= 0 && sent < bytes.size()) {
    const ssize_t n = ::send(fd_, bytes.data() + sent, bytes.size() - sent, MSG_NOSIGNAL);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return false;
    sent += static_cast<size_t>(n);
  }
  return fd_ >= 0;
}

std::string RawClient::read_until(const std::string& marker, std::chrono::milliseconds timeout) {
  bool closed = false;
  return read(marker, timeout, &closed);
}

std::string RawClient::read_until_closed(std::chrono::milliseconds timeout, bool* closed) {
  return read("", timeout, closed);
}

std::string RawClient::read(const std::string& marker, std::chrono::milliseconds timeout, bool* closed) {
  std::string data;
  *closed = false;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (fd_ >= 0 && (marker.empty() || data.find(marker) == std::string::npos)) {
    const auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) break;
    pollfd pfd{fd_, POLLIN, 0};
    if (::poll(&pfd, 1, static_cast<int>(left.count())) <= 0) continue;
    char buf[4096];
    const ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      *closed = true;
      break;
    }
    data.append(buf, static_cast<size_t>(n));
  }
  return data;
}

void RawClient::shut_write() {
  if (fd_ >= 0) ::shutdown(fd_, SHUT_WR);
}

void RawClient::reset() {
  if (fd_ < 0) return;
  linger l{1, 0};
  ::setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
  close();
}

void RawClient::close() {
  if (fd_ >= 0) ::close(fd_);
  fd_ = -1;
}

std::string json_post(const std::string& target, const std::string& body, const std::string& extra_headers) {
  return "POST " + target + " HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: " +
         std::to_string(body.size()) + "\r\n" + extra_headers + "\r\n" + body;
}

}  // namespace loragate::testing
