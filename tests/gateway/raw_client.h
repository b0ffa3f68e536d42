// A raw TCP client for the gateway tests that need control a HTTP library
// does not give: socket options set before connect (a small receive buffer
// and segment size, to make a slow reader), a half-close, a close by reset
// (SO_LINGER 0), and requests that are not well-formed HTTP.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>

namespace loragate::testing {

struct RawClientOptions {
  int receive_buffer = 0;  // SO_RCVBUF before connect; 0 = the system's
  int max_segment = 0;     // TCP_MAXSEG before connect; 0 = the system's
};

class RawClient {
 public:
  explicit RawClient(uint16_t port, RawClientOptions options = {});
  ~RawClient();
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return fd_ >= 0; }
  bool send_all(const std::string& bytes);
  // Reads until `marker` is in what was read, the server closes, or `timeout`.
  std::string read_until(const std::string& marker, std::chrono::milliseconds timeout);
  // Reads until the server closes or `timeout`; `closed` says which.
  std::string read_until_closed(std::chrono::milliseconds timeout, bool* closed);
  // shutdown(SHUT_WR): the request is complete, and the answer still wanted.
  void shut_write();
  // Closes with a reset instead of a FIN.
  void reset();
  void close();

 private:
  // Reads until `marker` is in what was read ("" = until the server closes) or `timeout`.
  std::string read(const std::string& marker, std::chrono::milliseconds timeout, bool* closed);
  int fd_ = -1;
};

// An HTTP/1.1 POST of a JSON body with Content-Length.
std::string json_post(const std::string& target, const std::string& body, const std::string& extra_headers = "");

}  // namespace loragate::testing
