#include "gateway/metrics/request_log.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>

#include <nlohmann/json.hpp>

namespace loragate {

std::string format_request_log(const RequestRecord& r) {
  using ojson = nlohmann::ordered_json;  // keys in the order written
  const double ts = std::chrono::duration<double>(std::chrono::system_clock::now().time_since_epoch()).count();
  auto round3 = [](double v) { return static_cast<double>(static_cast<int64_t>(v * 1000.0 + 0.5)) / 1000.0; };
  ojson line = {{"ts", round3(ts)},
                {"id", r.id},
                {"method", r.method},
                {"path", r.path},
                {"base", r.base},
                {"adapter", r.adapter},
                {"scenario", r.scenario},
                {"status", r.status},
                {"stream", r.streamed},
                {"tokens_in", r.prompt_tokens},
                {"tokens_out", r.completion_tokens},
                {"ttft_ms", r.ttft_ms < 0 ? ojson(nullptr) : ojson(round3(r.ttft_ms))},
                {"duration_ms", round3(r.e2e_ms)}};
  if (!r.finish_reason.empty()) line["finish_reason"] = r.finish_reason;
  return line.dump(-1, ' ', false, ojson::error_handler_t::replace) + "\n";
}

void write_request_log(const RequestRecord& record) {
  const std::string line = format_request_log(record);
  // One write(2): lines from concurrent requests stay whole.
  ssize_t ignored = ::write(STDERR_FILENO, line.data(), line.size());
  (void)ignored;
}

}  // namespace loragate
