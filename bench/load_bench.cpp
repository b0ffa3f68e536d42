#include "bench/load_bench.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include "bench/bench_util.h"
#include "engine/llama_model.h"
#include "model/model_dir.h"
#include "model/safetensors.h"

namespace loragate::bench {
namespace {

// A "Name:   1234 kB" line of /proc/self/status, in KiB (0 when absent).
long proc_status_kib(const std::string& name) {
  std::ifstream status("/proc/self/status");
  std::string line;
  while (std::getline(status, line)) {
    if (line.compare(0, name.size() + 1, name + ":") == 0) return std::atol(line.c_str() + name.size() + 1);
  }
  return 0;
}

void write_all(int fd, const std::string& text) {
  size_t done = 0;
  while (done < text.size()) {
    const ssize_t n = ::write(fd, text.data() + done, text.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return;
    done += static_cast<size_t>(n);
  }
}

// The child's half: loads, measures, and writes one line to `fd`:
// "ok <before> <peak> <steady> <weight bytes> <seconds>" or "error <message>".
[[noreturn]] void load_and_report(const std::string& model_dir, WeightType storage, int fd) {
  const long before = proc_status_kib("VmRSS");
  const BenchClock::time_point start = BenchClock::now();
  Result<std::shared_ptr<const ModelDir>> dir = ModelDir::open(model_dir);
  Result<std::unique_ptr<LlamaModel>> model =
      dir.is_ok() ? LlamaModel::load(**dir, storage) : Result<std::unique_ptr<LlamaModel>>(dir.status());
  const double seconds = seconds_since(start);
  const long steady = proc_status_kib("VmRSS");
  const long peak = proc_status_kib("VmHWM");  // after VmRSS: reading the file may add a page
  std::ostringstream line;
  if (model.is_ok()) {
    line << "ok " << before << " " << peak << " " << steady << " " << (*model)->weights().bytes() << " " << seconds
         << "\n";
  } else {
    line << "error " << model.status().to_string() << "\n";
  }
  write_all(fd, line.str());
  ::_exit(0);  // no destructors or atexit handlers: the parent owns those
}

std::string read_all(int fd) {
  std::string out;
  char buf[512];
  for (;;) {
    const ssize_t n = ::read(fd, buf, sizeof buf);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

double mib(double kib) { return kib / 1024.0; }

}  // namespace

Result<LoadMemory> measure_load(const std::string& model_dir, const std::string& storage) {
  LG_ASSIGN_OR_RETURN(const WeightType dtype, parse_weight_type(storage));
  int fds[2];
  if (::pipe(fds) != 0) return Status::io_error(std::string("pipe failed: ") + std::strerror(errno));
  std::fflush(nullptr);  // the child must not flush the parent's buffered output a second time
  const pid_t pid = ::fork();
  if (pid < 0) {
    const int err = errno;
    ::close(fds[0]);
    ::close(fds[1]);
    return Status::io_error(std::string("fork failed: ") + std::strerror(err));
  }
  if (pid == 0) {
    ::close(fds[0]);
    load_and_report(model_dir, dtype, fds[1]);
  }
  ::close(fds[1]);
  const std::string report = read_all(fds[0]);
  ::close(fds[0]);
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0 && errno == EINTR) {
  }
  if (!WIFEXITED(wstatus) || WEXITSTATUS(wstatus) != 0) {
    return Status::internal("the load child of " + model_dir + " died (wait status " + std::to_string(wstatus) +
                            "; out of memory?)");
  }
  std::istringstream in(report);
  std::string tag;
  in >> tag;
  if (tag == "error") {
    std::string message;
    std::getline(in, message);
    return Status::internal("loading " + model_dir + " failed:" + message);
  }
  LoadMemory m;
  if (tag != "ok" || !(in >> m.before_kib >> m.peak_kib >> m.steady_kib >> m.weight_bytes >> m.seconds)) {
    return Status::internal("the load child of " + model_dir + " reported '" + report + "'");
  }
  return m;
}

Status run_load_bench(const LoadBenchOptions& o) {
  // The file's size and dtype, from its header only (no tensor page is read).
  std::string file_dtype;
  double file_bytes = 0;
  {
    LG_ASSIGN_OR_RETURN(std::unique_ptr<WeightStore> store, WeightStore::open_dir(o.model_dir));
    const TensorView* embed = store->find("model.embed_tokens.weight");
    file_dtype = embed != nullptr ? std::string(dtype_name(embed->dtype)) : "?";
  }
  std::error_code ec;
  for (const auto& e : std::filesystem::directory_iterator(o.model_dir, ec)) {
    if (e.is_regular_file(ec) && e.path().extension() == ".safetensors") {
      file_bytes += static_cast<double>(e.file_size(ec));
    }
  }
  std::printf("loragate load-memory benchmark: model %s, %s tensors, %.1f MiB of safetensors\n", o.model_dir.c_str(),
              file_dtype.c_str(), file_bytes / (1 << 20));
  std::printf("each load runs in a fresh child; peak = VmHWM at the end of the load, steady = VmRSS then\n\n");
  std::printf("%-7s %12s %12s %12s %12s %12s %12s %8s\n", "storage", "weights MiB", "before MiB", "peak MiB",
              "steady MiB", "peak/steady", "peak/weights", "load s");
  for (const std::string& d : o.dtypes) {
    LG_ASSIGN_OR_RETURN(LoadMemory m, measure_load(o.model_dir, d));
    const double weights_mib = m.weight_bytes / (1 << 20);
    std::printf("%-7s %12.1f %12.1f %12.1f %12.1f %12.3f %12.3f %8.2f\n", d.c_str(), weights_mib, mib(m.before_kib),
                mib(m.peak_kib), mib(m.steady_kib), static_cast<double>(m.peak_kib) / static_cast<double>(m.steady_kib),
                mib(m.peak_kib) / weights_mib, m.seconds);
  }
  return Status::ok();
}

}  // namespace loragate::bench
