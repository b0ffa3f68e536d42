#include "evaluator/arm_engine.h"

#include <chrono>
#include <condition_variable>
#include <filesystem>
#include <functional>
#include <map>
#include <mutex>

#include "common/sha256.h"

namespace loragate::eval {
namespace {

// Collects the results of requests submitted to an EngineLoop.
class BatchSink final : public RequestSink {
 public:
  static constexpr std::chrono::milliseconds kCancelPoll{20};
  explicit BatchSink(size_t n) : results_(n) {}
  // Request `index` was refused at submit: its result is that error.
  void refuse(size_t index, const Status& why) {
    std::lock_guard<std::mutex> lock(mu_);
    GenerationResult& r = results_[index];
    r.finish_reason = FinishReason::kError;
    r.error = why.message();
    r.error_code = why.code();
  }
  // A request `id` was accepted; its finish may already have arrived.
  void expect(int64_t id, size_t index) {
    std::lock_guard<std::mutex> lock(mu_);
    index_[id] = index;
    ++pending_;
  }
  void on_token(int64_t, int32_t, std::string_view) override {}
  void on_finish(const GenerationResult& result) override {
    std::lock_guard<std::mutex> lock(mu_);
    finished_.push_back(result);
    --pending_;
    done_.notify_all();
  }
  // Waits for every request; matches results to requests by id. While
  // waiting, calls `on_cancel` once when `cancel` (may be null) turns true.
  std::vector<GenerationResult> wait(const std::atomic<bool>* cancel = nullptr,
                                     const std::function<void()>& on_cancel = nullptr) {
    std::unique_lock<std::mutex> lock(mu_);
    bool told = false;
    while (pending_ != 0) {
      if (cancel == nullptr || told) {
        done_.wait(lock);
      } else if (!done_.wait_for(lock, kCancelPoll, [&] { return pending_ == 0; }) && cancel->load()) {
        told = true;
        lock.unlock();
        on_cancel();
        lock.lock();
      }
    }
    for (GenerationResult& r : finished_) results_[index_.at(r.id)] = std::move(r);
    return std::move(results_);
  }

 private:
  std::mutex mu_;
  std::condition_variable done_;
  std::map<int64_t, size_t> index_;
  std::vector<GenerationResult> finished_;
  std::vector<GenerationResult> results_;
  int64_t pending_ = 0;  // accepted minus finished (briefly negative when a finish beats its expect)
};

// sha256 of the model's tokenizer.json; "" when it has none or it cannot be read.
std::string tokenizer_file_sha256(const ModelDir& model) {
  if (model.tokenizer() == nullptr) return "";
  Result<std::string> sha = sha256_file((std::filesystem::path(model.path()) / "tokenizer.json").string());
  return sha.is_ok() ? *sha : "";
}

// Runs an arm's requests on an EngineLoop: its own (offline, every request
// of a batch at once) or a loaded base's (in a server, one at a time and as
// background requests, so an evaluation holds at most one sequence of the
// base's batch and runs in what live traffic leaves of each step).
class LoopArm final : public ArmEngine {
 public:
  LoopArm(std::string name, std::string sha256, std::unique_ptr<EngineLoop> own)
      : name_(std::move(name)),
        sha256_(std::move(sha256)),
        own_(std::move(own)),
        loop_(*own_),
        tokenizer_sha256_(tokenizer_file_sha256(loop_.model())) {}
  LoopArm(std::shared_ptr<ServingBase> base, const std::atomic<bool>* cancel)
      : name_(base->name()),
        sha256_(base->sha256()),
        base_(std::move(base)),
        loop_(base_->loop()),
        cancel_(cancel),
        tokenizer_sha256_(tokenizer_file_sha256(loop_.model())) {}

  Result<std::vector<GenerationResult>> run(std::vector<GenerationRequest> requests) override {
    if (base_ == nullptr) return run_together(std::move(requests));
    std::vector<GenerationResult> results;
    for (GenerationRequest& request : requests) {
      request.priority = RequestPriority::kBackground;
      LG_ASSIGN_OR_RETURN(std::vector<GenerationResult> one, run_together({std::move(request)}));
      results.push_back(std::move(one.front()));
    }
    if (cancelled()) return Status::cancelled("the evaluation was cancelled");
    return results;
  }
  Status add_adapter(const std::string& name, const std::string& path) override {
    if (loop_.adapters()->contains(name)) return Status::ok();
    return loop_.adapters()->add(name, path);
  }
  const Tokenizer& tokenizer() const override { return *loop_.model().tokenizer(); }
  const ChatTemplate& chat_template() const override { return loop_.model().chat_template(); }
  const std::string& name() const override { return name_; }
  const std::string& sha256() const override { return sha256_; }
  const std::string& tokenizer_sha256() const override { return tokenizer_sha256_; }
  int64_t max_model_len() const override { return loop_.max_model_len(); }

 private:
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  // Submits every request, then waits for all of them; results in request
  // order, a refused request's as its error.
  Result<std::vector<GenerationResult>> run_together(std::vector<GenerationRequest> requests) {
    if (cancelled()) return Status::cancelled("the evaluation was cancelled");
    BatchSink sink(requests.size());
    std::vector<int64_t> ids;
    for (size_t i = 0; i < requests.size(); ++i) {
      requests[i].sink = &sink;
      Result<int64_t> id = loop_.submit(std::move(requests[i]));
      if (!id.is_ok()) {
        sink.refuse(i, id.status());
        continue;
      }
      sink.expect(*id, i);
      ids.push_back(*id);
    }
    // wait() returns only after every accepted request's on_finish, cancelled or not.
    return sink.wait(cancel_, [&] {
      for (int64_t id : ids) loop_.cancel(id);
    });
  }

  std::string name_, sha256_;
  std::unique_ptr<EngineLoop> own_;     // offline: the arm's own engine
  std::shared_ptr<ServingBase> base_;   // in a server: the base it runs on
  EngineLoop& loop_;
  const std::atomic<bool>* const cancel_ = nullptr;
  const std::string tokenizer_sha256_;
};

}  // namespace

Result<std::unique_ptr<ArmEngine>> load_offline_arm(const std::string& name, const std::string& model_dir,
                                                    const EngineOptions& options) {
  if (options.max_loras <= 0) return Status::invalid_argument("the evaluator needs max_loras > 0");
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> model, ModelDir::open(model_dir));
  if (model->tokenizer() == nullptr) return Status::invalid_argument("no tokenizer.json in " + model_dir);
  std::string sha = model->sha256();
  LG_ASSIGN_OR_RETURN(std::unique_ptr<EngineLoop> loop, EngineLoop::start(std::move(model), options));
  return std::unique_ptr<ArmEngine>(new LoopArm(name, std::move(sha), std::move(loop)));
}

std::unique_ptr<ArmEngine> serving_base_arm(std::shared_ptr<ServingBase> base, const std::atomic<bool>* cancel) {
  return std::make_unique<LoopArm>(std::move(base), cancel);
}

}  // namespace loragate::eval
