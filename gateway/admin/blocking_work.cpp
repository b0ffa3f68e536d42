#include "gateway/admin/blocking_work.h"

#include <algorithm>
#include <string>

#include <boost/asio/post.hpp>

#include "gateway/openai/openai_errors.h"

namespace loragate {

BlockingWork::BlockingWork(int32_t threads, int32_t max_jobs)
    : max_jobs_(std::max(1, max_jobs)), pool_(static_cast<size_t>(std::max(1, threads))) {}

BlockingWork::~BlockingWork() { join(); }

bool BlockingWork::post(std::function<void()> job) {
  if (joined_.load()) return false;
  if (pending_.fetch_add(1) >= max_jobs_) {
    pending_.fetch_sub(1);
    return false;
  }
  boost::asio::post(pool_, [this, job = std::move(job)] {
    job();
    pending_.fetch_sub(1);
  });
  return true;
}

void BlockingWork::join() {
  joined_.store(true);
  pool_.join();
}

HttpResponse blocking_work_refused(const BlockingWork& pool) {
  return error_response(http::status::service_unavailable,
                        "the server is busy: " + std::to_string(pool.max_jobs()) +
                            " requests already wait for a worker (or it is shutting down); retry later",
                        "", "service_unavailable");
}

}  // namespace loragate
