#include "gateway/http/stream_writer.h"

#include <utility>

#include <boost/asio/post.hpp>
#include <boost/asio/write.hpp>
#include <boost/beast/http/chunk_encode.hpp>
#include <boost/beast/http/write.hpp>

namespace loragate {

namespace beast = boost::beast;
namespace net = boost::asio;
namespace http = boost::beast::http;

void StreamWriter::start(Head head, OnWritten done) {
  head_.emplace(std::move(head));
  chunked_ = head_->chunked();
  keep_alive_ = head_->keep_alive();
  pending_.clear();
  state_ = State::kStreaming;
  serializer_.emplace(*head_);
  write_in_flight_ = true;
  stream_.expires_after(write_timeout_);
  http::async_write_header(stream_, *serializer_, std::move(done));
}

bool StreamWriter::send(std::string data, OnWritten done) {
  if (pending_.size() + data.size() > max_buffer_bytes_) {
    // Holding every event would grow without bound: the stream is cut off.
    std::string().swap(pending_);  // no write uses it: free it now
    state_ = State::kFailed;
    return false;
  }
  pending_ += data;
  flush(std::move(done));
  return true;
}

void StreamWriter::end(OnWritten done) {
  state_ = State::kEnding;
  flush(std::move(done));
}

void StreamWriter::flush(OnWritten done) {
  if (write_in_flight_) return;
  if (!pending_.empty()) {
    writing_.swap(pending_);
    pending_.clear();
    write_in_flight_ = true;
    stream_.expires_after(write_timeout_);
    if (chunked_) {
      net::async_write(stream_, http::make_chunk(net::buffer(writing_)), std::move(done));
    } else {
      net::async_write(stream_, net::buffer(writing_), std::move(done));
    }
    return;
  }
  if (state_ == State::kEnding) {
    state_ = State::kFinished;
    write_in_flight_ = true;
    stream_.expires_after(write_timeout_);
    if (chunked_) {
      net::async_write(stream_, http::make_chunk_last(), std::move(done));
    } else {  // HTTP/1.0: the connection's close ends the body
      net::post(stream_.get_executor(), [done = std::move(done)]() mutable { done(beast::error_code{}, 0); });
    }
  }
}

StreamWriter::Written StreamWriter::on_written(bool ok, OnWritten next) {
  write_in_flight_ = false;
  stream_.expires_never();
  if (!ok) {
    state_ = State::kFailed;
    release();
    return Written::kFailed;
  }
  if (state_ == State::kFinished) {  // the completed write was the end
    release();
    return Written::kFinished;
  }
  flush(std::move(next));  // may start writing the end: its own completion reports it
  return Written::kGoingOn;
}

void StreamWriter::abandon() {
  if (state_ == State::kStreaming || state_ == State::kEnding) state_ = State::kFailed;
  if (!write_in_flight_) release();
}

// Only once no write is in flight: an async write reads the head through the
// serializer and the piece from writing_ until its handler runs.
void StreamWriter::release() {
  serializer_.reset();
  head_.reset();
  std::string().swap(writing_);
  std::string().swap(pending_);
}

}  // namespace loragate
