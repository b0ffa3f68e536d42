#include "bench/serve_child.h"

#include <fcntl.h>
#include <signal.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>

#include "client/http_client.h"

namespace loragate::bench {
namespace {

constexpr size_t kTailBytes = 8 << 10;
constexpr std::string_view kServingMarker = " on http://";

// "128 + signal" for a child killed by a signal, as shells print it.
int exit_code_of(int status) {
  if (WIFEXITED(status)) return WEXITSTATUS(status);
  if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
  return -1;
}

// The URL of a "loragate: serving 'x' (...) on http://127.0.0.1:PORT (...)" line, or "".
std::string serving_url(const std::string& printed) {
  const size_t at = printed.find(kServingMarker);
  if (at == std::string::npos) return "";
  const size_t begin = at + 4;  // past " on "
  const size_t end = printed.find_first_of(" \n", begin);
  return end == std::string::npos ? "" : printed.substr(begin, end - begin);
}

}  // namespace

Result<std::unique_ptr<ServeChild>> ServeChild::start(const std::string& executable,
                                                      const std::vector<std::string>& serve_args,
                                                      std::chrono::seconds start_timeout) {
  // Everything exec needs is built before fork: the child of a threaded process may only make async-signal-safe calls.
  std::vector<std::string> args = {executable, "serve"};
  args.insert(args.end(), serve_args.begin(), serve_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);

  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::io_error(std::string("pipe2 failed: ") + std::strerror(errno));
  const pid_t parent = ::getpid();
  std::fflush(nullptr);  // the child must not flush the parent's buffered output again
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::io_error(std::string("fork failed: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::dup2(fds[1], STDOUT_FILENO);  // dup2 clears O_CLOEXEC on the copies
    ::dup2(fds[1], STDERR_FILENO);
    ::prctl(PR_SET_PDEATHSIG, SIGKILL);  // never outlive the benchmark, however it ends
    if (::getppid() != parent) ::_exit(125);  // the parent died before prctl
    ::execv(argv[0], argv.data());
    static constexpr char kExecFailed[] = "loragate bench: exec of the serve child failed\n";
    [[maybe_unused]] ssize_t ignored = ::write(STDERR_FILENO, kExecFailed, sizeof kExecFailed - 1);
    ::_exit(127);
  }
  ::close(fds[1]);

  std::unique_ptr<ServeChild> child(new ServeChild());
  child->pid_ = pid;
  child->out_fd_ = fds[0];
  child->drainer_ = std::thread([c = child.get()] { c->drain(); });
  const auto deadline = std::chrono::steady_clock::now() + start_timeout;
  LG_RETURN_IF_ERROR(child->wait_until_serving(deadline));
  LG_RETURN_IF_ERROR(child->wait_until_healthy(deadline));
  return child;
}

ServeChild::~ServeChild() {
  if (pid_ > 0) (void)stop(std::chrono::seconds(5));  // an error path already has its own error to report
  if (drainer_.joinable()) drainer_.join();  // the pipe reaches EOF once the child is gone
  if (out_fd_ >= 0) ::close(out_fd_);
}

void ServeChild::drain() {
  char buf[4096];
  for (;;) {
    const ssize_t n = ::read(out_fd_, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    std::lock_guard<std::mutex> lock(mu_);
    if (n <= 0) {
      eof_ = true;
      changed_.notify_all();
      return;
    }
    tail_.append(buf, static_cast<size_t>(n));
    if (tail_.size() > kTailBytes) tail_.erase(0, tail_.size() - kTailBytes);
    if (url_.empty() && first_lines_.size() < kTailBytes) {
      first_lines_.append(buf, static_cast<size_t>(n));
      changed_.notify_all();
    }
  }
}

std::string ServeChild::output_tail() const {
  std::lock_guard<std::mutex> lock(mu_);
  return tail_;
}

Status ServeChild::failed(const std::string& what) const {
  std::string tail = output_tail();
  while (!tail.empty() && tail.back() == '\n') tail.pop_back();
  return Status::unavailable("loragate serve " + what +
                             (tail.empty() ? std::string("; it printed nothing")
                                           : "; the end of what it printed:\n" + tail));
}

Status ServeChild::wait_until_serving(std::chrono::steady_clock::time_point deadline) {
  std::unique_lock<std::mutex> lock(mu_);
  std::string url;
  changed_.wait_until(lock, deadline, [&] {
    url = serving_url(first_lines_);
    return !url.empty() || eof_;
  });
  if (!url.empty()) {
    url_ = url;  // under mu_: drain() reads it
    return Status::ok();
  }
  const bool exited = eof_;
  lock.unlock();
  const int code = reap(std::chrono::milliseconds(exited ? 2000 : 0));
  if (code >= 0) return failed("exited with status " + std::to_string(code) + " before it served");
  return failed("printed no 'serving ... on http://' line in time");
}

Status ServeChild::wait_until_healthy(std::chrono::steady_clock::time_point deadline) {
  LG_ASSIGN_OR_RETURN(client::HttpClient http, client::HttpClient::create(url_));
  std::string last_error;
  while (std::chrono::steady_clock::now() < deadline) {
    Result<client::HttpResult> r = http.request("GET", "/health");
    if (r.is_ok() && r->ok()) return Status::ok();
    last_error = r.is_ok() ? "HTTP " + std::to_string(r->status) : r.status().message();
    http.close();
    if (const int code = reap(std::chrono::milliseconds(0)); code >= 0) {
      return failed("exited with status " + std::to_string(code) + " before /health answered");
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  return failed("did not answer GET " + url_ + "/health in time (last: " + last_error + ")");
}

int ServeChild::reap(std::chrono::milliseconds timeout) {
  if (pid_ <= 0) return -1;
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  for (;;) {
    int status = 0;
    const pid_t r = ::waitpid(pid_, &status, WNOHANG);
    if (r == pid_) {
      pid_ = -1;
      return exit_code_of(status);
    }
    if (r < 0 && errno == ECHILD) {  // reaped elsewhere: gone, its status unknown
      pid_ = -1;
      return 255;
    }
    if (std::chrono::steady_clock::now() >= deadline) return -1;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

Status ServeChild::stop(std::chrono::seconds grace) {
  if (pid_ <= 0) return Status::ok();
  ::kill(pid_, SIGTERM);  // serve drains and exits 0
  const int code = reap(grace);
  if (code < 0) {
    ::kill(pid_, SIGKILL);
    reap(std::chrono::seconds(5));
    if (drainer_.joinable()) drainer_.join();
    return failed("did not exit within " + std::to_string(grace.count()) + " s of SIGTERM and was killed");
  }
  if (drainer_.joinable()) drainer_.join();
  if (code != 0) return failed("exited with status " + std::to_string(code) + " on SIGTERM");
  return Status::ok();
}

}  // namespace loragate::bench
