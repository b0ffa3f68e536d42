// BlockingWork: jobs run off the caller's thread, at most max_jobs wait at
// once, and join() lets the accepted ones finish and refuses the rest.
#include "gateway/admin/blocking_work.h"

#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <future>
#include <thread>

namespace loragate::testing {
namespace {

TEST(BlockingWorkTest, RefusesPastMaxJobsAndFinishesWhatItAcceptedOnJoin) {
  BlockingWork pool(/*threads=*/1, /*max_jobs=*/2);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  std::atomic<int> done{0};
  const std::thread::id caller = std::this_thread::get_id();
  std::atomic<bool> ran_elsewhere{true};
  auto job = [&] {
    if (std::this_thread::get_id() == caller) ran_elsewhere = false;
    released.wait();
    ++done;
  };
  ASSERT_TRUE(pool.post(job));
  ASSERT_TRUE(pool.post(job));
  EXPECT_FALSE(pool.post(job)) << "two jobs pending already";
  release.set_value();
  pool.join();
  EXPECT_EQ(done.load(), 2);
  EXPECT_TRUE(ran_elsewhere.load());
  EXPECT_FALSE(pool.post(job)) << "joined";
}

TEST(BlockingWorkTest, AFinishedJobFreesItsPlace) {
  BlockingWork pool(/*threads=*/1, /*max_jobs=*/1);
  std::promise<void> first_done;
  ASSERT_TRUE(pool.post([&] { first_done.set_value(); }));
  first_done.get_future().wait();
  // The counter drops just after the job returns.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  bool accepted = false;
  while (!accepted && std::chrono::steady_clock::now() < deadline) {
    accepted = pool.post([] {});
    if (!accepted) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  EXPECT_TRUE(accepted);
}

}  // namespace
}  // namespace loragate::testing
