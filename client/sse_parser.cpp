// SseParser: server-sent events split out of a byte stream, event by event.
#include "client/http_client.h"

namespace loragate::client {

bool SseParser::feed(std::string_view bytes, const SseCallback& on_event) {
  size_t start = 0;
  for (size_t i = 0; i < bytes.size(); ++i) {
    const char c = bytes[i];
    if (c != '\n' && c != '\r') {
      after_cr_ = false;
      continue;
    }
    if (c == '\n' && after_cr_ && i == start && partial_.empty()) {
      // The '\n' of a "\r\n" whose '\r' ended the previous line.
      after_cr_ = false;
      start = i + 1;
      continue;
    }
    after_cr_ = c == '\r';
    std::string_view piece = bytes.substr(start, i - start);
    bool go;
    if (partial_.empty()) {
      go = line(piece, on_event);
    } else {
      partial_.append(piece);
      std::string whole = std::move(partial_);
      partial_.clear();
      go = line(whole, on_event);
    }
    start = i + 1;
    if (!go) return false;
  }
  partial_.append(bytes.substr(start));
  return true;
}

bool SseParser::line(std::string_view text, const SseCallback& on_event) {
  if (text.empty()) {  // the blank line that ends an event
    const bool had = has_data_;
    SseEvent ev{std::move(event_), std::move(data_)};
    event_.clear();
    data_.clear();
    has_data_ = false;
    if (!had) return true;
    ++events_;
    return on_event ? on_event(ev) : true;
  }
  if (text.front() == ':') return true;  // a comment
  const size_t colon = text.find(':');
  std::string_view field = text.substr(0, colon);
  std::string_view value = colon == std::string_view::npos ? std::string_view() : text.substr(colon + 1);
  if (!value.empty() && value.front() == ' ') value.remove_prefix(1);
  if (field == "data") {
    if (has_data_) data_.push_back('\n');
    data_.append(value);
    has_data_ = true;
  } else if (field == "event") {
    event_ = std::string(value);
  }
  return true;
}

}  // namespace loragate::client
