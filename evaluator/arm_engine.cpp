#include "evaluator/arm_engine.h"

#include <chrono>
#include <condition_variable>
#include <functional>
#include <map>
#include <mutex>

#include "common/sha256.h"

namespace loragate::eval {
namespace {

class OfflineArm final : public ArmEngine {
 public:
  OfflineArm(std::string name, std::string sha256, std::unique_ptr<Engine> engine, ChatTemplate tmpl)
      : name_(std::move(name)), sha256_(std::move(sha256)), engine_(std::move(engine)), tmpl_(std::move(tmpl)) {}

  Result<std::vector<GenerationResult>> run(std::vector<GenerationRequest> requests) override {
    return engine_->generate(std::move(requests));
  }
  Status add_adapter(const std::string& name, const std::string& path) override {
    return engine_->adapters()->add(name, path);
  }
  const Tokenizer& tokenizer() const override { return *engine_->tokenizer(); }
  const ChatTemplate& chat_template() const override { return tmpl_; }
  const std::string& name() const override { return name_; }
  const std::string& sha256() const override { return sha256_; }

 private:
  std::string name_, sha256_;
  std::unique_ptr<Engine> engine_;
  ChatTemplate tmpl_;
};

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

class ServingBaseArm final : public ArmEngine {
 public:
  ServingBaseArm(std::shared_ptr<ServingBase> base, const std::atomic<bool>* cancel)
      : base_(std::move(base)), cancel_(cancel) {}

  // One request at a time: an evaluation then holds at most one sequence of
  // the base's batch, so live traffic on the same loop barely notices it.
  Result<std::vector<GenerationResult>> run(std::vector<GenerationRequest> requests) override {
    std::vector<GenerationResult> results;
    for (GenerationRequest& request : requests) {
      if (cancelled()) return Status::cancelled("the evaluation was cancelled");
      BatchSink sink(1);
      request.sink = &sink;
      LG_ASSIGN_OR_RETURN(int64_t id, base_->loop().submit(std::move(request)));
      sink.expect(id, 0);
      // The sink lives on this stack: wait() returns only after its on_finish, cancelled or not.
      results.push_back(std::move(sink.wait(cancel_, [&] { base_->loop().cancel(id); }).front()));
    }
    if (cancelled()) return Status::cancelled("the evaluation was cancelled");
    return results;
  }
  Status add_adapter(const std::string& name, const std::string& path) override {
    if (base_->adapters()->contains(name)) return Status::ok();
    return base_->adapters()->add(name, path);
  }
  const Tokenizer& tokenizer() const override { return *base_->tokenizer(); }
  const ChatTemplate& chat_template() const override { return base_->chat_template(); }
  const std::string& name() const override { return base_->name(); }
  const std::string& sha256() const override { return base_->sha256(); }

 private:
  bool cancelled() const { return cancel_ != nullptr && cancel_->load(); }

  std::shared_ptr<ServingBase> base_;
  const std::atomic<bool>* const cancel_;
};

}  // namespace

Result<std::unique_ptr<ArmEngine>> load_offline_arm(const std::string& name, const std::string& model_dir,
                                                    const EngineOptions& options) {
  LG_ASSIGN_OR_RETURN(std::shared_ptr<const ModelDir> model, ModelDir::open(model_dir));
  if (model->tokenizer() == nullptr) return Status::invalid_argument("no tokenizer.json in " + model_dir);
  std::string sha = model->sha256();
  ChatTemplate tmpl = model->chat_template();
  LG_ASSIGN_OR_RETURN(std::unique_ptr<Engine> engine, Engine::load(std::move(model), options));
  if (engine->adapters() == nullptr) return Status::invalid_argument("the evaluator needs max_loras > 0");
  return std::unique_ptr<ArmEngine>(new OfflineArm(name, std::move(sha), std::move(engine), std::move(tmpl)));
}

std::unique_ptr<ArmEngine> serving_base_arm(std::shared_ptr<ServingBase> base, const std::atomic<bool>* cancel) {
  return std::make_unique<ServingBaseArm>(std::move(base), cancel);
}

}  // namespace loragate::eval
