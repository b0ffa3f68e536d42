#include "bench/serve_bench.h"

#include <algorithm>
#include <atomic>
#include <cmath>
#include <condition_variable>
#include <cstdio>
#include <deque>
#include <fstream>
#include <mutex>
#include <ostream>
#include <random>
#include <thread>

#include <nlohmann/json.hpp>

#include "bench/serve_prompts.h"
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

// --- the run -----------------------------------------------------------------

namespace {

using Clock = std::chrono::steady_clock;

std::string num(double v, int digits = 2) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.*f", digits, v);
  return buf;
}

double since(Clock::time_point t0, Clock::time_point t) { return std::chrono::duration<double>(t - t0).count(); }

// One conversation: its model, its first turn (made before the clock starts) and when it arrives.
struct Job {
  std::string model;
  BenchPrompt first_prompt;
  std::string first_body;
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

// The request body of request `index` (conversation * turns + turn); `salt` "" sends no cache_salt.
std::string make_body(const ServeBenchOptions& o, const std::string& model, const BenchPrompt& prompt, int index,
                      const std::string& salt) {
  json body;
  body["model"] = model;
  if (o.token_ids) {
    body["prompt"] = prompt.ids;
  } else {
    body["prompt"] = prompt.text;
  }
  body["max_tokens"] = o.max_tokens;
  body["temperature"] = o.temperature;
  body["seed"] = o.seed + static_cast<uint64_t>(index);
  body["ignore_eos"] = true;  // every request generates max_tokens
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  if (!salt.empty()) body["cache_salt"] = salt;
  // vLLM's way to get the answer's ids, so the next turn extends it exactly; servers without it ignore it.
  if (o.token_ids && o.turns > 1) body["return_token_ids"] = true;
  return body.dump();
}

// A number no earlier run drew: the cache_salt of one run's requests must match no other run's.
std::string run_nonce() {
  std::random_device rd;
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%08x%08x", rd(), rd());
  return buf;
}

// Sends one request and reads its stream; the answer's text (and ids, where
// the stream carries them) go to `answer`, for the conversation's next turn.
RequestOutcome run_one(client::HttpClient& http, const std::string& model, const std::string& body,
                       double arrival_s, Clock::time_point t0, TurnAnswer* answer) {
  RequestOutcome out;
  out.model = model;
  *answer = TurnAnswer{};
  const Clock::time_point start = Clock::now();
  out.send_s = since(t0, start);
  out.queue_s = std::max(0.0, out.send_s - arrival_s);
  Clock::time_point last = start;
  int64_t token_events = 0;
  int64_t usage_tokens = -1;
  bool done = false;
  std::string stream_error;
  auto res = http.stream("POST", "/v1/completions", body, {}, [&](const client::SseEvent& ev) {
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
      if (auto d = u->find("prompt_tokens_details"); d != u->end() && d->is_object() &&
                                                     d->contains("cached_tokens") &&
                                                     (*d)["cached_tokens"].is_number_integer()) {
        out.cached_tokens = (*d)["cached_tokens"].get<int64_t>();
      }
    }
    bool has_text = false;
    if (auto c = j.find("choices"); c != j.end() && c->is_array() && !c->empty()) {
      const json& first = (*c)[0];
      if (first.is_object() && first.contains("text") && first["text"].is_string()) {
        const std::string& text = first["text"].get_ref<const std::string&>();
        has_text = !text.empty();
        answer->text += text;
      }
      if (first.is_object() && first.contains("token_ids") && first["token_ids"].is_array()) {
        for (const json& id : first["token_ids"]) {
          if (id.is_number_integer()) answer->ids.push_back(id.get<int32_t>());
        }
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
          {"conversation", o.conversation}, {"turn", o.turn},
          {"cached_tokens", o.cached_tokens},
          {"status", o.status},       {"error", o.error},
          {"send_s", o.send_s},       {"queue_ms", o.queue_s * 1e3},
          {"ttft_ms", o.ttft_s * 1e3}, {"tpot_ms", o.tpot_s() * 1e3},
          {"e2e_ms", o.e2e_s * 1e3},  {"prompt_tokens", o.prompt_tokens},
          {"output_tokens", o.output_tokens}};
}

// The turns of conversation `c` in order, each prompt extending the last
// with its answer; outcomes land at c * turns + turn. A failed turn ends the
// conversation: the turns it leaves unsent count as failed too.
void run_conversation(client::HttpClient& http, const ServeBenchOptions& o, const ServePrompts& prompts,
                      const Job& job, int c, const std::string& salt_stem, Clock::time_point t0,
                      RequestOutcome* outcomes) {
  BenchPrompt prompt;
  TurnAnswer answer;
  for (int t = 0; t < o.turns; ++t) {
    const int index = c * o.turns + t;
    RequestOutcome& out = outcomes[t];
    if (t == 0) {
      out = run_one(http, job.model, job.first_body, job.arrival_s, t0, &answer);
    } else {
      prompt = prompts.next(t == 1 ? job.first_prompt : prompt, answer, c, t);
      const std::string salt = salt_stem.empty() ? "" : salt_stem + std::to_string(index);
      out = run_one(http, job.model, make_body(o, job.model, prompt, index, salt), since(t0, Clock::now()), t0,
                    &answer);
    }
    out.conversation = c;
    out.turn = t;
    if (out.ok) continue;
    for (int rest = t + 1; rest < o.turns; ++rest) {
      RequestOutcome& skipped = outcomes[rest];
      skipped.model = job.model;
      skipped.conversation = c;
      skipped.turn = rest;
      skipped.error = "not sent: turn " + std::to_string(t) + " of its conversation failed";
    }
    return;
  }
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
  if (options.turns < 1) return Status::invalid_argument("--turns must be at least 1");
  if (options.shared_prefix_len < 0) return Status::invalid_argument("--shared-prefix-len must not be negative");
  if (static_cast<int64_t>(options.requests) * options.turns > (int64_t{1} << 30)) {
    return Status::invalid_argument("--requests x --turns is too many requests");
  }
  LG_RETURN_IF_ERROR(client::parse_url(options.url).status());

  ServeBenchOptions o;
  std::vector<std::string> adapters;
  LG_RETURN_IF_ERROR(resolve_models(options, &o, &adapters));

  // Every conversation's model, first request and arrival, fixed by the seed
  // before the clock starts (later turns depend on the answers); one adapter per conversation.
  const ZipfSampler zipf(static_cast<int>(adapters.size()), o.zipf_s);
  std::mt19937_64 pick(o.seed + 17);
  const std::vector<double> arrivals = poisson_arrivals(o.requests, o.rate, o.seed);
  const ServePrompts prompts(o);
  const std::string salt_stem = o.cache_salt_per_request ? "lg-bench-" + run_nonce() + "-" : "";
  std::vector<Job> jobs(static_cast<size_t>(o.requests));
  for (int i = 0; i < o.requests; ++i) {
    Job& job = jobs[static_cast<size_t>(i)];
    const bool base = adapters.empty() || std::uniform_real_distribution<double>(0, 1)(pick) < o.base_fraction;
    job.model = base ? o.model : o.model_prefix + adapters[static_cast<size_t>(zipf.sample(pick))];
    job.first_prompt = prompts.first(i);
    const int index = i * o.turns;
    job.first_body =
        make_body(o, job.model, job.first_prompt, index, salt_stem.empty() ? "" : salt_stem + std::to_string(index));
    job.arrival_s = arrivals[static_cast<size_t>(i)];
  }

  out << "bench serve: "
      << (o.turns > 1 ? std::to_string(o.requests) + " conversations of " + std::to_string(o.turns) + " turns"
                      : std::to_string(o.requests) + " requests")
      << " to " << o.url << " at "
      << (std::isinf(o.rate) ? std::string("once") : num(o.rate) + " req/s (Poisson)") << ", "
      << (adapters.empty() ? std::string("base model only")
                           : std::to_string(adapters.size()) + " adapters (Zipf s=" + num(o.zipf_s) + ")" +
                                 (o.base_fraction > 0 ? ", base share " + num(o.base_fraction) : ""))
      << ", prompt " << o.prompt_len << (o.token_ids ? " ids" : " words")
      << (o.shared_prefix_len > 0 ? " after a shared prefix of " + std::to_string(o.shared_prefix_len) : "")
      << (o.turns > 1 ? " per turn (each turn extends the last with its answer)" : "") << ", max_tokens "
      << o.max_tokens << (o.cache_salt_per_request ? ", a cache_salt per request" : "") << ", "
      << std::min(o.concurrency, o.requests) << " client threads\n";
  out.flush();

  std::vector<RequestOutcome> outcomes(jobs.size() * static_cast<size_t>(o.turns));
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
      run_conversation(http, o, prompts, jobs[i], static_cast<int>(i), salt_stem, t0,
                       &outcomes[i * static_cast<size_t>(o.turns)]);
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
              {"turns", o.turns},
              {"shared_prefix_len", o.shared_prefix_len},
              {"cache_salt_per_request", o.cache_salt_per_request},
              {"token_ids", o.token_ids},
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
              {"e2e_ms", stats_json(report.e2e)},
              {"cached_tokens", report.cached_tokens},
              {"hit_rate", report.hit_rate},
              {"hit_requests", report.hit_requests},
              {"miss_requests", report.miss_requests},
              {"ttft_hits_ms", stats_json(report.ttft_hits)},
              {"ttft_misses_ms", stats_json(report.ttft_misses)}};
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
