#include "evaluator/arm_engine.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

namespace loragate::eval {
namespace {

// Collects the results of requests submitted to an EngineLoop.
class BatchSink final : public RequestSink {
 public:
  static constexpr std::chrono::milliseconds kCancelPoll{20};
  explicit BatchSink(size_t n) : results_(n) {}
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

// Runs an arm's requests on an EngineLoop: its own (offline, every request
// of a batch at once) or a loaded base's (in a server, one at a time, so an
// evaluation holds at most one sequence of the base's batch and live traffic
// on the same loop barely notices it).
class LoopArm final : public ArmEngine {
 public:
  LoopArm(std::string name, std::string sha256, std::unique_ptr<EngineLoop> own)
      : name_(std::move(name)), sha256_(std::move(sha256)), own_(std::move(own)), loop_(*own_) {}
  LoopArm(std::shared_ptr<ServingBase> base, const std::atomic<bool>* cancel)
      : name_(base->name()), sha256_(base->sha256()), base_(std::move(base)), loop_(base_->loop()), cancel_(cancel) {}

  Result<std::vector<GenerationResult>> run(std::vector<GenerationRequest> requests) override {
    if (base_ == nullptr) return run_together(std::move(requests));
    std::vector<GenerationResult> results;
    for (GenerationRequest& request : requests) {
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

 private:
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  // Submits every request, then waits for all of them; results in request order.
  Result<std::vector<GenerationResult>> run_together(std::vector<GenerationRequest> requests) {
    if (cancelled()) return Status::cancelled("the evaluation was cancelled");
    BatchSink sink(requests.size());
    std::vector<int64_t> ids;
    Status submitted;
    for (size_t i = 0; i < requests.size() && submitted.is_ok(); ++i) {
      requests[i].sink = &sink;
      Result<int64_t> id = loop_.submit(std::move(requests[i]));
      if (!id.is_ok()) {
        submitted = id.status();
        break;
      }
      sink.expect(*id, i);
      ids.push_back(*id);
    }
    if (!submitted.is_ok()) {  // end what was accepted before returning: the sink lives on this stack
      for (int64_t id : ids) loop_.cancel(id);
    }
    // wait() returns only after every accepted request's on_finish, cancelled or not.
    std::vector<GenerationResult> results = sink.wait(cancel_, [&] {
      for (int64_t id : ids) loop_.cancel(id);
    });
    LG_RETURN_IF_ERROR(submitted);
    return results;
  }

  std::string name_, sha256_;
  std::unique_ptr<EngineLoop> own_;     // offline: the arm's own engine
  std::shared_ptr<ServingBase> base_;   // in a server: the base it runs on
  EngineLoop& loop_;
  const std::atomic<bool>* const cancel_ = nullptr;
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
