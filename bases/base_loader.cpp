#include "bases/base_loader.h"

namespace loragate {

BaseLoader::BaseLoader() : thread_([this] { run(); }) {}

BaseLoader::~BaseLoader() { stop(); }

void BaseLoader::enqueue(std::function<void()> load) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (stopping_) return;
    queue_.push_back(std::move(load));
  }
  wake_.notify_one();
}

void BaseLoader::stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stopping_ = true;
    queue_.clear();
  }
  wake_.notify_one();
  if (thread_.joinable()) thread_.join();
}

void BaseLoader::run() {
  std::unique_lock<std::mutex> lock(mu_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (stopping_) return;
    std::function<void()> load = std::move(queue_.front());
    queue_.pop_front();
    lock.unlock();
    load();
    lock.lock();
  }
}

}  // namespace loragate
