// The client's server-sent-events parser (SseParser). The same bytes are fed
// three ways (whole, one byte at a time, and in chunks whose sizes come from
// the input) and must give the same events: the parser promises that a
// stream may be cut anywhere, between '\r' and '\n' included. A callback
// that asks to stop must stop the parser.
//
// Input: byte 0 seeds the chunk sizes; the rest is the event stream.
#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "client/http_client.h"

using namespace loragate;
using loragate::client::SseEvent;
using loragate::client::SseParser;

namespace {

std::vector<SseEvent> parse(std::string_view bytes, uint8_t seed, int mode) {
  SseParser parser;
  std::vector<SseEvent> events;
  auto on_event = [&](const SseEvent& e) {
    events.push_back(e);
    return true;
  };
  if (mode == 0) {
    parser.feed(bytes, on_event);
  } else {
    size_t at = 0;
    uint32_t state = seed;
    while (at < bytes.size()) {
      size_t n = 1;
      if (mode == 2) {
        state = state * 1103515245u + 12345u;
        n = 1 + (state >> 16) % 64;
      }
      n = std::min(n, bytes.size() - at);
      parser.feed(bytes.substr(at, n), on_event);
      at += n;
    }
  }
  if (parser.events() != static_cast<int64_t>(events.size())) __builtin_trap();
  return events;
}

bool same(const std::vector<SseEvent>& a, const std::vector<SseEvent>& b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (a[i].event != b[i].event || a[i].data != b[i].data) return false;
  }
  return true;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const std::string_view bytes(reinterpret_cast<const char*>(data) + 1, size - 1);
  const std::vector<SseEvent> whole = parse(bytes, data[0], 0);
  if (!same(whole, parse(bytes, data[0], 1))) __builtin_trap();  // byte at a time differs from whole
  if (!same(whole, parse(bytes, data[0], 2))) __builtin_trap();  // chunked differs from whole

  // Stopping: the callback says stop at the first event; feed() says false and nothing more is delivered.
  if (!whole.empty()) {
    SseParser parser;
    int delivered = 0;
    const bool more = parser.feed(bytes, [&](const SseEvent&) {
      ++delivered;
      return false;
    });
    if (more || delivered != 1) __builtin_trap();
  }
  return 0;
}
