#include "bench/serve_bench.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <numeric>
#include <ostream>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/bench_util.h"
#include "client/http_client.h"

namespace loragate::bench {

using nlohmann::json;

// --- sampling ----------------------------------------------------------------

ZipfSampler::ZipfSampler(int n, double s) {
  cdf_.resize(static_cast<size_t>(std::max(n, 0)));
  double total = 0;
  for (int k = 0; k < n; ++k) {
    total += 1.0 / std::pow(static_cast<double>(k + 1), s);
    cdf_[static_cast<size_t>(k)] = total;
  }
  for (double& c : cdf_) c /= total;
  if (!cdf_.empty()) cdf_.back() = 1.0;
}

double ZipfSampler::probability(int k) const {
  if (k < 0 || k >= size()) return 0.0;
  return cdf_[static_cast<size_t>(k)] - (k == 0 ? 0.0 : cdf_[static_cast<size_t>(k - 1)]);
}

int ZipfSampler::sample(std::mt19937_64& rng) const {
  if (cdf_.empty()) return -1;
  const double u = std::uniform_real_distribution<double>(0.0, 1.0)(rng);
  const auto it = std::upper_bound(cdf_.begin(), cdf_.end(), u);
  return static_cast<int>(std::min<ptrdiff_t>(it - cdf_.begin(), size() - 1));
}

std::vector<double> poisson_arrivals(int n, double rate, uint64_t seed) {
  std::vector<double> t(static_cast<size_t>(std::max(n, 0)), 0.0);
  if (std::isinf(rate) || rate <= 0) return t;
  std::mt19937_64 rng(seed ^ 0x9e3779b97f4a7c15ull);
  std::exponential_distribution<double> gap(rate);
  double now = 0;
  for (double& x : t) {
    x = now;
    now += gap(rng);
  }
  return t;
}

// --- statistics --------------------------------------------------------------

double RequestOutcome::tpot_s() const {
  if (output_tokens < 2) return 0.0;
  return (e2e_s - ttft_s) / static_cast<double>(output_tokens - 1);
}

LatencyStats latency_stats_ms(const std::vector<double>& seconds) {
  LatencyStats s;
  if (seconds.empty()) return s;
  std::vector<double> ms(seconds.size());
  std::transform(seconds.begin(), seconds.end(), ms.begin(), [](double x) { return x * 1000.0; });
  s.mean = std::accumulate(ms.begin(), ms.end(), 0.0) / static_cast<double>(ms.size());
  s.median = median(ms);
  s.p99 = percentile(std::move(ms), 99.0);
  return s;
}

ServeBenchReport summarize_serve(const std::vector<RequestOutcome>& outcomes, double duration_s,
                                 const ServeBenchOptions& options) {
  ServeBenchReport r;
  r.duration_s = duration_s;
  r.has_slo = options.slo_ttft_ms > 0 || options.slo_tpot_ms > 0;
  std::vector<double> ttft, tpot, itl, e2e, queue;
  for (const RequestOutcome& o : outcomes) {
    ++r.requests_per_model[o.model];
    if (o.model == options.model) ++r.base_requests;
    queue.push_back(o.queue_s);
    if (!o.ok) {
      ++r.failed;
      ++r.failures_by_status[o.status];
      if (r.first_error.empty()) r.first_error = o.error;
      continue;
    }
    ++r.completed;
    r.input_tokens += o.prompt_tokens;
    r.output_tokens += o.output_tokens;
    ttft.push_back(o.ttft_s);
    if (o.output_tokens > 1) tpot.push_back(o.tpot_s());
    itl.insert(itl.end(), o.itl_s.begin(), o.itl_s.end());
    e2e.push_back(o.e2e_s);
    const bool ttft_ok = options.slo_ttft_ms <= 0 || o.ttft_s * 1000.0 <= options.slo_ttft_ms;
    const bool tpot_ok = options.slo_tpot_ms <= 0 || o.tpot_s() * 1000.0 <= options.slo_tpot_ms;
    if (ttft_ok && tpot_ok) ++r.good;
  }
  if (duration_s > 0) {
    r.request_throughput = r.completed / duration_s;
    r.output_throughput = static_cast<double>(r.output_tokens) / duration_s;
    r.total_token_throughput = static_cast<double>(r.input_tokens + r.output_tokens) / duration_s;
    r.goodput = r.good / duration_s;
  }
  r.ttft = latency_stats_ms(ttft);
  r.tpot = latency_stats_ms(tpot);
  r.itl = latency_stats_ms(itl);
  r.e2e = latency_stats_ms(e2e);
  r.queue = latency_stats_ms(queue);
  return r;
}

namespace {

std::string row(const std::string& label, const std::string& value) {
  char buf[256];
  std::snprintf(buf, sizeof(buf), "%-40s %s\n", label.c_str(), value.c_str());
  return buf;
}

std::string num(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

std::string banner(const std::string& title, char fill) {
  const size_t width = 50;
  if (title.empty()) return std::string(width, fill) + "\n";
  const size_t left = title.size() + 2 >= width ? 0 : (width - title.size() - 2) / 2;
  const size_t right = title.size() + 2 >= width ? 0 : width - title.size() - 2 - left;
  return std::string(left, fill) + " " + title + " " + std::string(right, fill) + "\n";
}

std::string latency_block(const std::string& title, const std::string& name, const LatencyStats& s) {
  std::string out = banner(title, '-');
  out += row("Mean " + name + " (ms):", num(s.mean));
  out += row("Median " + name + " (ms):", num(s.median));
  out += row("P99 " + name + " (ms):", num(s.p99));
  return out;
}

}  // namespace

std::string format_serve_report(const ServeBenchReport& r, const ServeBenchOptions& o) {
  std::string out = banner("Serving Benchmark Result", '=');
  out += row("Successful requests:", std::to_string(r.completed));
  out += row("Failed requests:", std::to_string(r.failed));
  for (const auto& [status, count] : r.failures_by_status) {
    out += row(status == 0 ? "  no HTTP error status (transport/stream):" : "  HTTP " + std::to_string(status) + ":",
               std::to_string(count));
  }
  out += row("Benchmark duration (s):", num(r.duration_s));
  out += row("Total input tokens:", std::to_string(r.input_tokens));
  out += row("Total generated tokens:", std::to_string(r.output_tokens));
  out += row("Request throughput (req/s):", num(r.request_throughput));
  out += row("Output token throughput (tok/s):", num(r.output_throughput));
  out += row("Total Token throughput (tok/s):", num(r.total_token_throughput));
  if (r.has_slo) {
    std::string slo;
    if (o.slo_ttft_ms > 0) slo += "TTFT<=" + num(o.slo_ttft_ms, 0) + "ms";
    if (o.slo_tpot_ms > 0) slo += std::string(slo.empty() ? "" : ", ") + "TPOT<=" + num(o.slo_tpot_ms, 0) + "ms";
    out += row("SLO:", slo);
    out += row("Requests within SLO:", std::to_string(r.good));
    out += row("Request goodput (req/s):", num(r.goodput));
  }
  int adapters_used = 0;
  for (const auto& [model, count] : r.requests_per_model) adapters_used += model == o.model ? 0 : 1;
  out += row("Requests to the base model:", std::to_string(r.base_requests));
  out += row("Distinct adapters used:", std::to_string(adapters_used));
  out += row("Mean client queueing (ms):", num(r.queue.mean));
  out += latency_block("Time to First Token", "TTFT", r.ttft);
  out += latency_block("Time per Output Token (excl. 1st token)", "TPOT", r.tpot);
  out += latency_block("Inter-token Latency", "ITL", r.itl);
  out += latency_block("End-to-end Latency", "E2EL", r.e2e);
  out += banner("", '=');
  if (!r.first_error.empty()) out += "first error: " + r.first_error + "\n";
  return out;
}

// --- the run -----------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

struct Job {
  std::string model;
  std::string body;
  double arrival_s = 0;
};

// Resolves the base model and the adapters requests are spread over.
Status resolve_models(const ServeBenchOptions& o, ServeBenchOptions* resolved, std::vector<std::string>* adapters) {
  *resolved = o;
  const bool need_adapter_list = o.adapter_names.empty() && o.adapters != 0;
  const bool need_base = (o.base_fraction > 0 || o.adapters == 0) && o.model.empty();
  std::vector<std::string> served;
  if (need_adapter_list || need_base) {
    LG_ASSIGN_OR_RETURN(auto client, client::HttpClient::create(o.url));
    LG_ASSIGN_OR_RETURN(auto res, client.request("GET", "/v1/models"));
    LG_RETURN_IF_ERROR(client::status_from_http(res).with_context("GET /v1/models"));
    const json j = json::parse(res.body, nullptr, false);
    if (!j.is_object() || !j.contains("data") || !j["data"].is_array()) {
      return Status::corrupt("GET /v1/models: not a model list: " + res.body.substr(0, 200));
    }
    std::string base;
    for (const json& m : j["data"]) {
      if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
      const bool child = m.contains("parent") && m["parent"].is_string();
      if (!child && base.empty()) base = m["id"].get<std::string>();
    }
    if (resolved->model.empty()) resolved->model = base;
    for (const json& m : j["data"]) {
      if (!m.is_object() || !m.contains("id") || !m["id"].is_string()) continue;
      if (m.contains("parent") && m["parent"].is_string() &&
          (resolved->model.empty() || m["parent"].get<std::string>() == resolved->model)) {
        served.push_back(m["id"].get<std::string>());
      }
    }
  }
  const std::vector<std::string>& names = o.adapter_names.empty() ? served : o.adapter_names;
  const int k = o.adapters < 0 ? static_cast<int>(names.size()) : o.adapters;
  if (k > static_cast<int>(names.size())) {
    return Status::invalid_argument("--adapters " + std::to_string(k) + " but only " + std::to_string(names.size()) +
                                    (o.adapter_names.empty() ? " adapters are served by " + o.url
                                                             : " names are given in --adapter-names"));
  }
  adapters->assign(names.begin(), names.begin() + k);
  if (adapters->empty() || o.base_fraction > 0) {
    if (resolved->model.empty()) return Status::not_found("no base model: " + o.url + " lists none; pass --model");
  }
  return Status::ok();
}

const char* const kWords[] = {
    "the",   "of",    "and",   "to",    "in",    "is",    "that",  "for",   "it",    "as",    "was",   "with",
    "be",    "by",    "on",    "not",   "he",    "this",  "are",   "or",    "his",   "from",  "at",    "which",
    "but",   "have",  "an",    "had",   "they",  "you",   "were",  "their", "one",   "all",   "we",    "can",
    "her",   "has",   "there", "been",  "if",    "more",  "when",  "will",  "would", "who",   "so",    "no",
    "time",  "people", "year", "way",   "day",   "man",   "thing", "woman", "life",  "child", "world", "school",
    "state", "family", "group", "water"};

std::string make_body(const ServeBenchOptions& o, const std::string& model, int index) {
  std::mt19937_64 rng(o.seed * 1000003ull + static_cast<uint64_t>(index) + 1);
  json body;
  body["model"] = model;
  if (o.token_ids) {
    std::uniform_int_distribution<int> id(3, std::max(3, o.vocab - 1));
    json ids = json::array();
    for (int i = 0; i < o.prompt_len; ++i) ids.push_back(id(rng));
    body["prompt"] = std::move(ids);
  } else {
    std::uniform_int_distribution<size_t> w(0, std::size(kWords) - 1);
    std::string text;
    for (int i = 0; i < o.prompt_len; ++i) {
      if (i) text.push_back(' ');
      text += kWords[w(rng)];
    }
    body["prompt"] = std::move(text);
  }
  body["max_tokens"] = o.max_tokens;
  body["temperature"] = o.temperature;
  body["seed"] = o.seed + static_cast<uint64_t>(index);
  body["ignore_eos"] = true;  // every request generates max_tokens
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  return body.dump();
}

RequestOutcome run_one(client::HttpClient& http, const Job& job, Clock::time_point t0) {
  RequestOutcome out;
  out.model = job.model;
  const Clock::time_point start = Clock::now();
  out.send_s = since(t0, start);
  out.queue_s = std::max(0.0, out.send_s - job.arrival_s);
  Clock::time_point last = start;
  int64_t token_events = 0;
  int64_t usage_tokens = -1;
  bool done = false;
  std::string stream_error;
  auto res = http.stream("POST", "/v1/completions", job.body, {}, [&](const client::SseEvent& ev) {
    const Clock::time_point now = Clock::now();
    if (ev.data == "[DONE]") {
      done = true;
      return true;
    }
    const json j = json::parse(ev.data, nullptr, false);
    if (!j.is_object()) {
      stream_error = "an event that is not JSON: " + ev.data.substr(0, 200);
      return false;
    }
    if (auto e = j.find("error"); e != j.end()) {
      stream_error = e->is_object() && e->contains("message") && (*e)["message"].is_string()
                         ? (*e)["message"].get<std::string>()
                         : e->dump();
      return false;
    }
    if (auto u = j.find("usage"); u != j.end() && u->is_object()) {
      if (u->contains("completion_tokens") && (*u)["completion_tokens"].is_number_integer()) {
        usage_tokens = (*u)["completion_tokens"].get<int64_t>();
      }
      if (u->contains("prompt_tokens") && (*u)["prompt_tokens"].is_number_integer()) {
        out.prompt_tokens = (*u)["prompt_tokens"].get<int64_t>();
      }
    }
    bool has_text = false;
    if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
      const json& first = (*c)[0];
      if (first.is_object() && first.contains("text") && first["text"].is_string()) {
        has_text = !first["text"].get_ref<const std::string&>().empty();
      }
    }
    if (has_text) {
      if (token_events == 0) {
        out.ttft_s = since(start, now);
      } else {
        out.itl_s.push_back(since(last, now));
      }
      last = now;
      ++token_events;
    }
    return true;
  });
  out.e2e_s = since(start, Clock::now());
  if (!res.is_ok()) {
    out.error = res.status().message();
  } else if (!res->ok()) {
    out.status = res->status;
    out.error = client::status_from_http(*res).message();
  } else if (!stream_error.empty()) {
    out.error = "stream error: " + stream_error;
  } else if (!done) {
    out.error = "the stream ended without data: [DONE]";
  } else {
    out.ok = true;
    out.status = res->status;
    out.output_tokens = usage_tokens >= 0 ? usage_tokens : token_events;
    if (token_events == 0) out.ttft_s = out.e2e_s;
  }
  return out;
}

json outcome_json(const RequestOutcome& o) {
  return {{"model", o.model},         {"ok", o.ok},
          {"status", o.status},       {"error", o.error},
          {"send_s", o.send_s},       {"queue_ms", o.queue_s * 1e3},
          {"ttft_ms", o.ttft_s * 1e3}, {"tpot_ms", o.tpot_s() * 1e3},
          {"e2e_ms", o.e2e_s * 1e3},  {"prompt_tokens", o.prompt_tokens},
          {"output_tokens", o.output_tokens}};
}

json stats_json(const LatencyStats& s) { return {{"mean", s.mean}, {"median", s.median}, {"p99", s.p99}}; }

}  // namespace

Result<ServeBenchReport> run_serve_bench(const ServeBenchOptions& options, std::ostream& out) {
  if (options.requests < 1) return Status::invalid_argument("--requests must be at least 1");
  if (options.concurrency < 1) return Status::invalid_argument("--concurrency must be at least 1");
  if (!(options.rate > 0)) return Status::invalid_argument("--rate must be positive (or inf)");
  if (options.base_fraction < 0 || options.base_fraction > 1) {
    return Status::invalid_argument("--base-fraction must be within [0, 1]");
  }
  LG_RETURN_IF_ERROR(client::parse_url(options.url).status());

  ServeBenchOptions o;
  std::vector<std::string> adapters;
  LG_RETURN_IF_ERROR(resolve_models(options, &o, &adapters));

  // Every request's model, body and arrival, fixed by the seed before the clock starts.
  const ZipfSampler zipf(static_cast<int>(adapters.size()), o.zipf_s);
  std::mt19937_64 pick(o.seed + 17);
  const std::vector<double> arrivals = poisson_arrivals(o.requests, o.rate, o.seed);
  std::vector<Job> jobs(static_cast<size_t>(o.requests));
  for (int i = 0; i < o.requests; ++i) {
    Job& job = jobs[static_cast<size_t>(i)];
    const bool base = adapters.empty() || std::uniform_real_distribution<double>(0, 1)(pick) < o.base_fraction;
    job.model = base ? o.model : o.model_prefix + adapters[static_cast<size_t>(zipf.sample(pick))];
    job.body = make_body(o, job.model, i);
    job.arrival_s = arrivals[static_cast<size_t>(i)];
  }

  out << "bench serve: " << o.requests << " requests to " << o.url << " at "
      << (std::isinf(o.rate) ? std::string("once") : num(o.rate) + " req/s (Poisson)") << ", "
      << (adapters.empty() ? std::string("base model only")
                           : std::to_string(adapters.size()) + " adapters (Zipf s=" + num(o.zipf_s) + ")" +
                                 (o.base_fraction > 0 ? ", base share " + num(o.base_fraction) : ""))
      << ", prompt " << o.prompt_len << (o.token_ids ? " ids" : " words") << ", max_tokens " << o.max_tokens
      << ", " << std::min(o.concurrency, o.requests) << " client threads\n";
  out.flush();

  std::vector<RequestOutcome> outcomes(jobs.size());
  std::mutex mu;
  std::condition_variable cv;
  std::deque<size_t> ready;
  bool closed = false;
  const Clock::time_point t0 = Clock::now();
  std::atomic<int64_t> finished_ns{0};

  client::ClientOptions copts;
  copts.read_timeout = std::chrono::milliseconds(static_cast<int64_t>(o.timeout_s * 1000));
  const auto url = client::parse_url(o.url).value();
  auto worker = [&] {
    client::HttpClient http(url, copts);
    for (;;) {
      size_t i;
      {
        std::unique_lock<std::mutex> lock(mu);
        cv.wait(lock, [&] { return closed || !ready.empty(); });
        if (ready.empty()) return;
        i = ready.front();
        ready.pop_front();
      }
      outcomes[i] = run_one(http, jobs[i], t0);
      const int64_t end_ns =
          std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - t0).count();
      int64_t prev = finished_ns.load();
      while (prev < end_ns && !finished_ns.compare_exchange_weak(prev, end_ns)) {
      }
    }
  };
  std::vector<std::thread> threads;
  const int n_threads = std::min(o.concurrency, o.requests);
  threads.reserve(static_cast<size_t>(n_threads));
  for (int t = 0; t < n_threads; ++t) threads.emplace_back(worker);
  for (size_t i = 0; i < jobs.size(); ++i) {
    std::this_thread::sleep_until(t0 + std::chrono::duration_cast<Clock::duration>(
                                           std::chrono::duration<double>(jobs[i].arrival_s)));
    {
      std::lock_guard<std::mutex> lock(mu);
      ready.push_back(i);
    }
    cv.notify_one();
  }
  {
    std::lock_guard<std::mutex> lock(mu);
    closed = true;
  }
  cv.notify_all();
  for (std::thread& t : threads) t.join();

  const double duration = static_cast<double>(finished_ns.load()) / 1e9;
  ServeBenchReport report = summarize_serve(outcomes, duration, o);
  out << format_serve_report(report, o);
  out.flush();

  if (!o.result_json.empty()) {
    json j = {{"url", o.url},
              {"rate", std::isinf(o.rate) ? json("inf") : json(o.rate)},
              {"requests", o.requests},
              {"adapters", adapters},
              {"zipf_s", o.zipf_s},
              {"base_model", o.model},
              {"prompt_len", o.prompt_len},
              {"max_tokens", o.max_tokens},
              {"concurrency", o.concurrency},
              {"duration_s", report.duration_s},
              {"completed", report.completed},
              {"failed", report.failed},
              {"input_tokens", report.input_tokens},
              {"output_tokens", report.output_tokens},
              {"request_throughput", report.request_throughput},
              {"output_throughput", report.output_throughput},
              {"total_token_throughput", report.total_token_throughput},
              {"slo_ttft_ms", o.slo_ttft_ms},
              {"slo_tpot_ms", o.slo_tpot_ms},
              {"goodput", report.goodput},
              {"ttft_ms", stats_json(report.ttft)},
              {"tpot_ms", stats_json(report.tpot)},
              {"itl_ms", stats_json(report.itl)},
              {"e2e_ms", stats_json(report.e2e)}};
    json failures = json::object();
    for (const auto& [status, count] : report.failures_by_status) failures[std::to_string(status)] = count;
    j["failures_by_status"] = std::move(failures);
    json per = json::array();
    for (const RequestOutcome& oc : outcomes) per.push_back(outcome_json(oc));
    j["per_request"] = std::move(per);
    std::ofstream f(o.result_json);
    f << j.dump(2) << "\n";
    if (!f) return Status::io_error("cannot write " + o.result_json);
  }
  return report;
}

}  // namespace loragate::bench
