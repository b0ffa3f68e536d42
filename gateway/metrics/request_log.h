// The request log: one JSON line per finished request on stderr, e.g.
//   {"ts":…,"id":7,"method":"POST","path":"/v1/completions","adapter":"a","scenario":"",
//    "status":200,"tokens_in":5,"tokens_out":48,"ttft_ms":3.1,"duration_ms":21.7}
// Each line is one write, so lines from concurrent requests do not interleave.
#pragma once

#include <string>

#include "gateway/metrics/request_observer.h"

namespace loragate {

std::string format_request_log(const RequestRecord& record);
void write_request_log(const RequestRecord& record);

}  // namespace loragate
