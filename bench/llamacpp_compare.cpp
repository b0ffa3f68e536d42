#include "bench/llamacpp_compare.h"

#include <fcntl.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "bench/llama_gguf.h"

namespace loragate::bench {
namespace {

namespace fs = std::filesystem;

std::string whole_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

// The last non-empty line of `text`: what a failing tool said last.
std::string last_output_line(const std::string& text) {
  const size_t end = text.find_last_not_of(" \r\n\t");
  if (end == std::string::npos) return "(no output)";
  const size_t newline = text.rfind('\n', end);
  const size_t start = newline == std::string::npos ? 0 : newline + 1;
  return text.substr(start, end + 1 - start);
}

// Runs `argv` with stdout and stderr to files; returns its exit status, or
// an error when it could not be started or did not exit normally.
Result<int> run_to_files(const std::vector<std::string>& argv, const std::string& out_path,
                         const std::string& err_path) {
  const pid_t pid = ::fork();
  if (pid < 0) return Status::io_error(std::string("fork failed: ") + std::strerror(errno));
  if (pid == 0) {
    const int out = ::open(out_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    const int err = ::open(err_path.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0644);
    if (out < 0 || err < 0) ::_exit(126);
    ::dup2(out, STDOUT_FILENO);
    ::dup2(err, STDERR_FILENO);
    std::vector<char*> args;
    for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
    args.push_back(nullptr);
    ::execv(args[0], args.data());
    std::fprintf(stderr, "cannot run %s: %s\n", args[0], std::strerror(errno));
    ::_exit(127);
  }
  int wstatus = 0;
  while (::waitpid(pid, &wstatus, 0) < 0) {
    if (errno != EINTR) return Status::io_error(std::string("waitpid failed: ") + std::strerror(errno));
  }
  if (WIFSIGNALED(wstatus)) {
    return Status::internal(argv[0] + " was killed by signal " + std::to_string(WTERMSIG(wstatus)));
  }
  return WEXITSTATUS(wstatus);
}

}  // namespace

Result<GgmlType> llamacpp_type_for(const std::string& dtype) {
  if (dtype == "int4") return GgmlType::kQ4_0;  // both: group 32, one f16 scale, symmetric
  if (dtype == "int8") return GgmlType::kQ8_0;  // Q8_0 scales per 32 values, loragate per row
  if (dtype == "bf16") return GgmlType::kBF16;
  if (dtype == "f32") return GgmlType::kF32;
  return Status::unsupported("llama.cpp has no like-for-like type for " + dtype);
}

Result<LlamaBenchFigures> parse_llama_bench_json(const std::string& text) {
  const nlohmann::json tests = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (!tests.is_array()) return Status::corrupt("llama-bench's output is not a JSON array of tests");
  LlamaBenchFigures f;
  for (const nlohmann::json& t : tests) {
    if (!t.is_object() || !t.contains("n_prompt") || !t.contains("n_gen") || !t.contains("avg_ts") ||
        !t["avg_ts"].is_number()) {
      return Status::corrupt("a llama-bench test lacks n_prompt, n_gen or a numeric avg_ts");
    }
    const int64_t n_prompt = t["n_prompt"].get<int64_t>(), n_gen = t["n_gen"].get<int64_t>();
    if (n_prompt > 0 && n_gen == 0) f.prefill_tps = t["avg_ts"].get<double>();
    if (n_gen > 0 && n_prompt == 0) f.decode_tps = t["avg_ts"].get<double>();
  }
  if (f.prefill_tps <= 0 || f.decode_tps <= 0) {
    return Status::corrupt("llama-bench's output lacks a prompt (pp) or a generation (tg) figure");
  }
  return f;
}

Result<std::unique_ptr<LlamaCppComparison>> LlamaCppComparison::prepare(const std::string& bin_dir,
                                                                        const std::string& model_dir,
                                                                        const std::vector<std::string>& dtypes) {
  std::error_code ec;
  if (!fs::is_directory(bin_dir, ec)) return Status::not_found(bin_dir + " is not a directory");
  const std::string binary = (fs::path(bin_dir) / "llama-bench").string();
  if (::access(binary.c_str(), X_OK) != 0) return Status::not_found(binary + " is missing or not executable");

  std::unique_ptr<LlamaCppComparison> c(new LlamaCppComparison());
  c->binary_ = binary;
  std::string templ = (fs::temp_directory_path() / "lg-llamacpp-XXXXXX").string();
  if (::mkdtemp(templ.data()) == nullptr) {
    return Status::io_error("cannot create a temporary folder for the GGUF files");
  }
  c->work_dir_ = templ;

  // Does it run at all (a binary for another CPU, missing libraries)?
  const std::string out = c->work_dir_ + "/help.out", err = c->work_dir_ + "/help.err";
  LG_ASSIGN_OR_RETURN(int help_status, run_to_files({binary, "--help"}, out, err));
  if (help_status != 0) {
    return Status::unavailable(binary + " --help exited with status " + std::to_string(help_status) + ": " +
                               last_output_line(whole_file(err)));
  }

  for (const std::string& d : dtypes) {
    Result<GgmlType> type = llamacpp_type_for(d);
    if (!type.is_ok()) {
      c->skipped_[d] = type.status().message();
      continue;
    }
    const std::string gguf = c->work_dir_ + "/" + d + "-" + std::string(ggml_type_name(type.value())) + ".gguf";
    Status written = write_llama_gguf(model_dir, type.value(), gguf);
    if (!written.is_ok()) {
      c->skipped_[d] = "writing its GGUF failed: " + written.message();
      continue;
    }
    c->gguf_by_dtype_[d] = gguf;
    c->samples_[d];
  }
  if (c->gguf_by_dtype_.empty()) return Status::unsupported("none of the dtypes asked has a llama.cpp counterpart");
  return c;
}

LlamaCppComparison::~LlamaCppComparison() {
  std::error_code ec;
  if (!work_dir_.empty()) fs::remove_all(work_dir_, ec);
}

bool LlamaCppComparison::compares(const std::string& dtype) const {
  return gguf_by_dtype_.count(dtype) > 0 && skipped_.count(dtype) == 0;
}

Result<LlamaBenchFigures> LlamaCppComparison::run_llama_bench(const std::string& gguf, int prompt_len, int steps,
                                                              int threads) const {
  const std::string out = work_dir_ + "/bench.json", err = work_dir_ + "/bench.err";
  const std::vector<std::string> argv = {binary_, "-m", gguf, "-p", std::to_string(prompt_len),
                                         "-n", std::to_string(steps), "-t", std::to_string(threads),
                                         "-r", "1", "-o", "json"};
  LG_ASSIGN_OR_RETURN(int status, run_to_files(argv, out, err));
  if (status != 0) {
    return Status::unavailable("llama-bench exited with status " + std::to_string(status) + ": " +
                               last_output_line(whole_file(err)));
  }
  return parse_llama_bench_json(whole_file(out));
}

void LlamaCppComparison::run_once(const std::string& dtype, int prompt_len, int steps, int threads) {
  if (!compares(dtype)) return;
  Result<LlamaBenchFigures> f = run_llama_bench(gguf_by_dtype_.at(dtype), prompt_len, steps, threads);
  if (!f.is_ok()) {
    skipped_[dtype] = f.status().message();
    return;
  }
  samples_[dtype].push_back(f.value());
}

const std::vector<LlamaBenchFigures>& LlamaCppComparison::samples(const std::string& dtype) const {
  static const std::vector<LlamaBenchFigures> none;
  auto it = samples_.find(dtype);
  return it == samples_.end() ? none : it->second;
}

}  // namespace loragate::bench
