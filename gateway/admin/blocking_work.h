// BlockingWork: a small, bounded pool of threads for what must not run on a
// network strand — reading and hashing adapter files, registry writes (an
// fsync, or a wait on SQLite's busy timeout), parsing, rendering and
// tokenising large prompts. A network thread busy with such work stalls every connection it
// serves, /health included.
//
//   run_off_strand(pool, exchange,
//                  [=] { return expensive(); },               // on a pool thread
//                  [=](Result r) { exchange->respond(...); }); // on the exchange's strand
//
// Owned by the Gateway. post() and run_off_strand() are thread-safe; join()
// lets every accepted job finish and refuses new ones.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <type_traits>

#include <boost/asio/thread_pool.hpp>

#include "gateway/http/http_exchange.h"

namespace loragate {

class BlockingWork {
 public:
  // `threads` run jobs; at most `max_jobs` are queued or running at once.
  BlockingWork(int32_t threads, int32_t max_jobs);
  ~BlockingWork();  // join()
  BlockingWork(const BlockingWork&) = delete;
  BlockingWork& operator=(const BlockingWork&) = delete;

  // Queues `job`; false (and nothing runs) when max_jobs are pending already or after join().
  bool post(std::function<void()> job);
  // Waits for every accepted job; later posts are refused. Idempotent.
  void join();
  int32_t max_jobs() const { return max_jobs_; }

 private:
  const int32_t max_jobs_;
  std::atomic<int32_t> pending_{0};
  std::atomic<bool> joined_{false};
  boost::asio::thread_pool pool_;
};

// The 503 an exchange gets when the pool refuses its job.
HttpResponse blocking_work_refused(const BlockingWork& pool);

// Runs `work()` on `pool`, then `then(result)` on `exchange`'s strand; when
// the pool refuses, answers 503 at once. `work` must not touch the exchange
// (it runs off its strand); what it returns must be copyable.
template <typename Work, typename Then>
void run_off_strand(BlockingWork& pool, const std::shared_ptr<Exchange>& exchange, Work work, Then then) {
  using Output = std::invoke_result_t<Work&>;
  const bool accepted = pool.post([exchange, work = std::move(work), then = std::move(then)]() mutable {
    auto output = std::make_shared<Output>(work());
    exchange->post([then = std::move(then), output]() mutable { then(std::move(*output)); });
  });
  if (!accepted) exchange->respond(blocking_work_refused(pool));
}

// Parsing, rendering or tokenising less text than this takes well under a
// millisecond: done on the strand, it costs less than the two thread hops.
inline constexpr size_t kOnStrandTextBytes = 64u << 10;

// run_off_strand() for work over `text_bytes` of text past kOnStrandTextBytes;
// smaller work runs, with `then`, right here on the strand.
template <typename Work, typename Then>
void run_off_strand_if_large(BlockingWork& pool, const std::shared_ptr<Exchange>& exchange, size_t text_bytes,
                             Work work, Then then) {
  if (text_bytes <= kOnStrandTextBytes) return then(work());
  run_off_strand(pool, exchange, std::move(work), std::move(then));
}

}  // namespace loragate
