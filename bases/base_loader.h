// BaseLoader: the one thread on which a BaseSet loads its bases, one at a
// time, in the order they were asked for (a load takes the cores it is given:
// two at once would only slow each other and the serving base).
//
// A load cannot be interrupted: stop() (and the destructor) lets the running
// one finish and drops the queued ones. Owned by the BaseSet, which stops it
// before anything its loads use goes away. Thread-safe.
#pragma once

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>

namespace loragate {

class BaseLoader {
 public:
  BaseLoader();
  ~BaseLoader();  // stop()
  BaseLoader(const BaseLoader&) = delete;
  BaseLoader& operator=(const BaseLoader&) = delete;

  // Runs `load` on the loader thread after those queued before it; dropped once stopping.
  void enqueue(std::function<void()> load);
  // Waits for the running load; queued ones never run. Idempotent.
  void stop();

 private:
  void run();

  std::mutex mu_;
  std::condition_variable wake_;
  std::deque<std::function<void()>> queue_;  // guarded by mu_
  bool stopping_ = false;                    // guarded by mu_
  std::thread thread_;
};

}  // namespace loragate
