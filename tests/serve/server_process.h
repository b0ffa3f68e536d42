// Runs the real `loragate serve` binary as a child process on an ephemeral
// port, for end-to-end tests: start() waits for the "serving ... on URL" line,
// stop() sends SIGTERM and returns the exit status.
#pragma once

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <string>
#include <thread>
#include <vector>

namespace loragate::testing {

class ServerProcess {
 public:
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
    if (drain_.joinable()) drain_.join();  // the pipe reaches EOF once the child is gone
    if (fd_ >= 0) close(fd_);
  }

  // Starts `loragate serve ARGS... --port 0` and returns its base URL, or "" (with output()) on failure.
  std::string start(const std::vector<std::string>& args) {
    int out[2];
    if (pipe(out) != 0) return "";
    pid_ = fork();
    if (pid_ == 0) {
      dup2(out[1], STDOUT_FILENO);
      dup2(out[1], STDERR_FILENO);
      close(out[0]);
      std::vector<std::string> all = {LORAGATE_BIN, "serve", "--port", "0"};
      all.insert(all.end(), args.begin(), args.end());
      std::vector<char*> argv;
      for (std::string& a : all) argv.push_back(a.data());
      argv.push_back(nullptr);
      execv(LORAGATE_BIN, argv.data());
      _exit(127);
    }
    close(out[1]);
    fd_ = out[0];
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(60);
    while (std::chrono::steady_clock::now() < deadline) {
      char buf[4096];
      const ssize_t n = read(fd_, buf, sizeof buf);
      if (n <= 0) break;
      output_.append(buf, static_cast<size_t>(n));
      const size_t at = output_.find(" on http://");
      if (at != std::string::npos) {
        const size_t end = output_.find_first_of(" \n", at + 4);
        if (end != std::string::npos) {
          drain_ = std::thread([fd = fd_] {  // keep the pipe empty so the server never blocks on its log
            char sink[4096];
            while (read(fd, sink, sizeof sink) > 0) {
            }
          });
          return output_.substr(at + 4, end - at - 4);
        }
      }
    }
    return "";
  }

  // SIGTERM, then the exit code (-1 if it did not exit normally within 30 s).
  int stop() {
    if (pid_ <= 0) return -1;
    kill(pid_, SIGTERM);
    int status = 0;
    for (int i = 0; i < 300; ++i) {
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        if (drain_.joinable()) drain_.join();
        close(fd_);
        fd_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return -1;
  }

  const std::string& output() const { return output_; }
  pid_t pid() const { return pid_; }
  // SIGKILL, as a crash: nothing is drained or flushed.
  void kill_now() {
    if (pid_ <= 0) return;
    kill(pid_, SIGKILL);
    waitpid(pid_, nullptr, 0);
    pid_ = -1;
    if (drain_.joinable()) drain_.join();
    close(fd_);
    fd_ = -1;
  }

 private:
  pid_t pid_ = -1;
  int fd_ = -1;
  std::string output_;
  std::thread drain_;
};

}  // namespace loragate::testing
