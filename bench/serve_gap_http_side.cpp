// The HTTP side of `loragate bench serve-gap`: the workload sent to a
// `loragate serve` child as concurrent /v1/completions requests (one
// keep-alive connection each), streamed or not, and its step count read
// from /metrics.
#include <algorithm>
#include <cstdlib>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "bench/serve_gap_sides.h"

namespace loragate::bench::serve_gap_detail {

using nlohmann::json;

// One streamed completion, put together from its events.
struct HttpSide::StreamedCompletion {
  std::string text;
  int64_t completion_tokens = -1;  // from the usage chunk
  std::string error;
  bool add(const std::string& data) {
    if (data == "[DONE]") return true;
    try {
      const json chunk = json::parse(data);
      if (chunk.contains("error")) {
        error = "stream error: " + chunk.at("error").dump();
        return false;
      }
      for (const json& choice : chunk.at("choices")) {
        text += choice.at("text").get<std::string>();
        const json& reason = choice.at("finish_reason");
        if (!reason.is_null() && reason != "length") error = "a completion finished with " + reason.dump();
      }
      if (chunk.contains("usage") && chunk.at("usage").is_object()) {
        completion_tokens = chunk.at("usage").at("completion_tokens").get<int64_t>();
      }
    } catch (const json::exception& e) {
      error = std::string("unexpected stream event (") + e.what() + "): " + data.substr(0, 300);
      return false;
    }
    return true;
  }
};

// One client (one keep-alive connection) per concurrent request, kept across runs.
// `stream`: SSE answers, one event per token, instead of one JSON body each.
Result<std::unique_ptr<HttpSide>> HttpSide::connect(const std::string& url, size_t clients, bool stream) {
  client::ClientOptions co;
  co.read_timeout = std::chrono::minutes(10);  // a loaded machine may take long over one whole generation
  std::unique_ptr<HttpSide> side(new HttpSide(stream));
  LG_ASSIGN_OR_RETURN(side->metrics_, client::HttpClient::create(url, co));
  for (size_t i = 0; i < clients; ++i) {
    LG_ASSIGN_OR_RETURN(client::HttpClient c, client::HttpClient::create(url, co));
    side->clients_.push_back(std::move(c));
  }
  return side;
}

Result<SideRun> HttpSide::run(const Workload& w) {
  std::vector<std::string> bodies;
  for (size_t i = 0; i < w.size(); ++i) {
    json body = {{"model", w.adapters[i].empty() ? std::string(kServedName) : w.adapters[i]},
                 {"prompt", w.prompts[i]},
                 {"max_tokens", w.new_tokens},
                 {"temperature", 0},
                 {"ignore_eos", true}};
    if (stream_) {
      body["stream"] = true;
      body["stream_options"] = {{"include_usage", true}};
    }
    bodies.push_back(body.dump());
  }
  std::vector<Result<client::HttpResult>> answers(w.size(), Status::internal("not sent"));
  std::vector<StreamedCompletion> streamed(w.size());
  std::vector<BenchClock::time_point> ends(w.size());
  LG_ASSIGN_OR_RETURN(const int64_t steps_before, settled_steps());
  const BenchClock::time_point start = BenchClock::now();
  std::vector<std::thread> senders;
  for (size_t i = 0; i < w.size(); ++i) {
    senders.emplace_back([&, i] {
      if (stream_) {
        answers[i] = clients_[i].stream("POST", "/v1/completions", bodies[i], {},
                                        [&s = streamed[i]](const client::SseEvent& e) { return s.add(e.data); });
      } else {
        answers[i] = clients_[i].request("POST", "/v1/completions", bodies[i]);
      }
      ends[i] = BenchClock::now();
    });
  }
  for (std::thread& t : senders) t.join();
  SideRun run;
  run.wall_s = std::chrono::duration<double>(*std::max_element(ends.begin(), ends.end()) - start).count();
  LG_ASSIGN_OR_RETURN(const int64_t steps_after, settled_steps());
  run.steps = steps_after - steps_before;
  for (size_t i = 0; i < w.size(); ++i) {
    if (!answers[i].is_ok()) return answers[i].status().with_context("HTTP side: request " + std::to_string(i));
    LG_RETURN_IF_ERROR(client::status_from_http(*answers[i]).with_context("HTTP side: request " + std::to_string(i)));
    if (stream_) {
      if (!streamed[i].error.empty()) return Status::internal("HTTP side: " + streamed[i].error);
      run.tokens.push_back(streamed[i].completion_tokens);
      run.text.push_back(std::move(streamed[i].text));
      continue;
    }
    LG_ASSIGN_OR_RETURN(auto parsed, read_completion(answers[i]->body));
    run.tokens.push_back(parsed.first);
    run.text.push_back(std::move(parsed.second));
  }
  return run;
}

// The value of a per-base /metrics sample of the served base, e.g. loragate_engine_steps_total.
Result<double> HttpSide::metric(const std::string& text, const std::string& family) {
  const std::string prefix = family + "{base=\"" + kServedName + "\"} ";
  const size_t at = text.find("\n" + prefix);
  if (at == std::string::npos) return Status::not_found("GET /metrics has no " + prefix + "sample");
  return std::strtod(text.c_str() + at + 1 + prefix.size(), nullptr);
}

// The child's engine steps once it has counted the step that finished the last request.
Result<int64_t> HttpSide::settled_steps() {
  const BenchClock::time_point limit = BenchClock::now() + kSettleLimit;
  for (;;) {
    LG_ASSIGN_OR_RETURN(client::HttpResult r, metrics_.request("GET", "/metrics"));
    LG_RETURN_IF_ERROR(client::status_from_http(r).with_context("HTTP side: GET /metrics"));
    LG_ASSIGN_OR_RETURN(const double running, metric(r.body, "loragate_running_sequences"));
    LG_ASSIGN_OR_RETURN(const double waiting, metric(r.body, "loragate_queue_length"));
    if ((running == 0 && waiting == 0) || BenchClock::now() >= limit) {
      LG_ASSIGN_OR_RETURN(const double steps, metric(r.body, "loragate_engine_steps_total"));
      return static_cast<int64_t>(steps);
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

// usage.completion_tokens and choices[0].text of a non-streaming completion.
Result<std::pair<int64_t, std::string>> HttpSide::read_completion(const std::string& body) {
  try {
    const json j = json::parse(body);
    const json& choice = j.at("choices").at(0);
    if (choice.at("finish_reason") != "length") {
      return Status::internal("HTTP side: a completion finished with " + choice.at("finish_reason").dump());
    }
    return std::make_pair(j.at("usage").at("completion_tokens").get<int64_t>(), choice.at("text").get<std::string>());
  } catch (const json::exception& e) {
    return Status::internal(std::string("HTTP side: unexpected completion body (") + e.what() + "): " +
                            body.substr(0, 300));
  }
}

}  // namespace loragate::bench::serve_gap_detail
