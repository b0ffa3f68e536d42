// StreamWriter: the streamed answers of one connection (SSE and other
// responses written piece by piece): the head, then the body pieces as the
// handler produces them, then the end. At most one write is on the socket at
// a time; pieces that come meanwhile are queued and go out together, up to
// max_buffer_bytes. HTTP/1.1 bodies are chunked; an HTTP/1.0 body has no
// chunks and ends when the connection does.
//
// Owned by its HttpSession, one per connection, and used only on that
// connection's strand (not thread-safe). The session hears every write's
// completion (the OnWritten handler it passes in, which keeps it alive) and
// hands it back to on_written(). The head's serializer and the piece being
// written live until that write's completion ran, whatever ended the
// exchange meanwhile.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>
#include <string>

#include <boost/beast/core/tcp_stream.hpp>
#include <boost/beast/http/empty_body.hpp>
#include <boost/beast/http/message.hpp>
#include <boost/beast/http/serializer.hpp>

namespace loragate {

class StreamWriter {
 public:
  enum class State {
    kIdle,       // no stream started on this connection yet
    kStreaming,  // the head is written or on its way; pieces are taken
    kEnding,     // end() was called: the queued pieces go out, then the end
    kFinished,   // the end is written or on its way; stays so until the next start()
    kFailed,     // a write failed, the queue overflowed, or the exchange ended first
  };
  // What a completed write meant for the stream.
  enum class Written {
    kGoingOn,   // more is written or awaited
    kFinished,  // the end was written: the stream is over, its buffers freed
    kFailed,    // the write failed or the exchange ended: over, buffers freed
  };
  using Head = boost::beast::http::response<boost::beast::http::empty_body>;
  // Completion of one write the writer started.
  using OnWritten = std::function<void(boost::beast::error_code, std::size_t)>;

  StreamWriter(boost::beast::tcp_stream& stream, std::chrono::milliseconds write_timeout,
               uint64_t max_buffer_bytes)
      : stream_(stream), write_timeout_(write_timeout), max_buffer_bytes_(max_buffer_bytes) {}
  StreamWriter(const StreamWriter&) = delete;
  StreamWriter& operator=(const StreamWriter&) = delete;

  State state() const { return state_; }
  // A stream runs that takes more pieces.
  bool accepts_pieces() const { return state_ == State::kStreaming && head_.has_value(); }
  // The end of the running stream is on its way (its write not yet completed).
  bool end_on_its_way() const { return state_ == State::kFinished && head_.has_value(); }
  // Whether the connection may carry another request once the stream ended (from the head).
  bool keep_alive() const { return keep_alive_; }

  // Writes `head`, which says how the body is framed (chunked) and whether the
  // connection stays open. → kStreaming.
  void start(Head head, OnWritten done);
  // Queues `data` and writes it unless a write is in flight. False, and
  // kFailed, when the queue would grow past max_buffer_bytes: the client reads
  // slower than the engine writes.
  bool send(std::string data, OnWritten done);
  // Asks for the end once the queued pieces are out. → kEnding.
  void end(OnWritten done);
  // A write completed; `ok` false when it failed or the exchange ended while
  // it was on its way. Unless that ends the stream, writes what is queued next.
  Written on_written(bool ok, OnWritten next);
  // The exchange is over: frees the buffers unless a write is in flight (its
  // on_written() does then). A stream not finished is failed.
  void abandon();

 private:
  void flush(OnWritten done);
  void release();

  boost::beast::tcp_stream& stream_;
  const std::chrono::milliseconds write_timeout_;
  const uint64_t max_buffer_bytes_;
  State state_ = State::kIdle;
  std::optional<Head> head_;
  std::optional<boost::beast::http::response_serializer<boost::beast::http::empty_body>> serializer_;
  bool chunked_ = true;
  bool keep_alive_ = false;
  bool write_in_flight_ = false;
  std::string pending_;  // pieces queued while a write is in flight
  std::string writing_;  // the piece being written
};

}  // namespace loragate
