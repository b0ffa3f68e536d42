// ServerOptions: how the HTTP server listens, and its limits and timeouts.
// One field per YAML key (server.*); every field has a safe default.
#pragma once

#include <chrono>
#include <cstdint>
#include <string>
#include <string_view>

namespace loragate {

struct ServerOptions {
  std::string host = "127.0.0.1";                        // address to bind; "0.0.0.0" for every interface
  uint16_t port = 8000;                                  // TCP port; 0 = an ephemeral port (tests)
  int32_t io_threads = 2;                                // threads running the network event loop
  uint64_t max_body_bytes = 1u << 20;                    // larger request bodies get 413
  uint32_t max_header_bytes = 8u << 10;                  // larger request headers get 431
  int32_t max_connections = 1024;                        // connections past this are closed at accept
  std::chrono::milliseconds read_timeout{30'000};        // to read one whole request once it has begun
  std::chrono::milliseconds idle_timeout{60'000};        // keep-alive: wait for the next request this long
  std::chrono::milliseconds write_timeout{30'000};       // to write one response (or one stream chunk)
  std::chrono::milliseconds shutdown_deadline{30'000};   // stop(): in-flight requests get this long to finish
  int32_t max_queued_requests = 256;                     // generation requests in flight at once; more get 429
  // A stream's events queued while the client is slower than the engine; a
  // reader that falls this far behind is cut off (its sequence cancelled).
  uint64_t max_stream_buffer_bytes = 1u << 20;
  // GET /v1/models lists the adapters and GET /metrics answers without the
  // admin token (as vLLM and LoRAX do); false = both need it, and
  // /v1/models shows anyone else only the base.
  bool public_listings = true;
  // How chat tool calls are read from output under tool_choice "auto":
  // "auto" picks from the chat template (gateway/openai/tool_choice.h), "hermes",
  // "llama3_json", or "none" (plain content).
  std::string tool_call_parser = "auto";
};

// A server.tool_call_parser value this build knows.
inline bool valid_tool_call_parser(std::string_view name) {
  return name == "auto" || name == "hermes" || name == "llama3_json" || name == "none";
}

}  // namespace loragate
