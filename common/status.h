// Status and Result<T>: the error type passed between loragate's modules.
//
// A Status is either ok or carries a code and a message that says what was
// wrong and where (file, tensor, key). Result<T> holds a T or a failed Status.
// Both are plain values: copyable, movable, no exceptions across modules.
#pragma once

#include <cassert>
#include <string>
#include <utility>
#include <variant>

namespace loragate {

enum class StatusCode {
  kOk = 0,
  kInvalidArgument,   // the caller's input is malformed or out of range
  kNotFound,          // a file, tensor, key or id does not exist
  kCorrupt,           // a file exists but its contents are malformed
  kUnsupported,       // valid input that loragate does not implement
  kResourceExhausted, // out of KV blocks, slots, memory or queue space
  kIoError,           // the operating system refused a read, write or map
  kAlreadyExists,     // a name or id being registered is taken
  kFailedPrecondition, // refused in the current state: the conflict code (in use, serving already); resolve and retry
  kUnavailable,       // the service cannot take it now (shutting down, an adapter that does not load); retry later
  kCancelled,         // the work was cancelled before it finished (a client went, the server stopped)
  kInsufficientMemory, // a memory budget refuses it: not transient, free memory (remove a base) before retrying
  kInternal,          // a broken invariant inside loragate
};

const char* status_code_name(StatusCode code);

class [[nodiscard]] Status {
 public:
  Status() = default;  // ok

  static Status ok() { return Status(); }
  static Status invalid_argument(std::string m) { return {StatusCode::kInvalidArgument, std::move(m)}; }
  static Status not_found(std::string m) { return {StatusCode::kNotFound, std::move(m)}; }
  static Status corrupt(std::string m) { return {StatusCode::kCorrupt, std::move(m)}; }
  static Status unsupported(std::string m) { return {StatusCode::kUnsupported, std::move(m)}; }
  static Status resource_exhausted(std::string m) { return {StatusCode::kResourceExhausted, std::move(m)}; }
  static Status io_error(std::string m) { return {StatusCode::kIoError, std::move(m)}; }
  static Status already_exists(std::string m) { return {StatusCode::kAlreadyExists, std::move(m)}; }
  static Status failed_precondition(std::string m) { return {StatusCode::kFailedPrecondition, std::move(m)}; }
  static Status unavailable(std::string m) { return {StatusCode::kUnavailable, std::move(m)}; }
  static Status cancelled(std::string m) { return {StatusCode::kCancelled, std::move(m)}; }
  static Status insufficient_memory(std::string m) { return {StatusCode::kInsufficientMemory, std::move(m)}; }
  static Status internal(std::string m) { return {StatusCode::kInternal, std::move(m)}; }

  bool is_ok() const { return code_ == StatusCode::kOk; }
  explicit operator bool() const { return is_ok(); }
  StatusCode code() const { return code_; }
  const std::string& message() const { return message_; }
  // "<code name>: <message>", for logs and CLI output.
  std::string to_string() const;

  // Returns a copy whose message is prefixed with `context`: "context: message".
  Status with_context(const std::string& context) const;

 private:
  Status(StatusCode code, std::string message) : code_(code), message_(std::move(message)) {}

  StatusCode code_ = StatusCode::kOk;
  std::string message_;
};

template <typename T>
class [[nodiscard]] Result {
 public:
  Result(T value) : v_(std::move(value)) {}  // NOLINT(google-explicit-constructor)
  Result(Status status) : v_(std::move(status)) {  // NOLINT(google-explicit-constructor)
    assert(!std::get<Status>(v_).is_ok() && "a Result must not hold an ok Status");
  }

  bool is_ok() const { return std::holds_alternative<T>(v_); }
  explicit operator bool() const { return is_ok(); }

  const Status& status() const {
    static const Status kOk;
    return is_ok() ? kOk : std::get<Status>(v_);
  }
  T& value() & { return std::get<T>(v_); }
  const T& value() const& { return std::get<T>(v_); }
  T&& value() && { return std::get<T>(std::move(v_)); }
  T* operator->() { return &value(); }
  const T* operator->() const { return &value(); }
  T& operator*() & { return value(); }
  const T& operator*() const& { return value(); }

 private:
  std::variant<T, Status> v_;
};

}  // namespace loragate

// Propagates a failed Status (or the Status of a failed Result) to the caller.
#define LG_RETURN_IF_ERROR(expr)                  \
  do {                                            \
    ::loragate::Status lg_status_ = (expr);       \
    if (!lg_status_.is_ok()) return lg_status_;   \
  } while (0)

#define LG_CONCAT_INNER(a, b) a##b
#define LG_CONCAT(a, b) LG_CONCAT_INNER(a, b)
// LG_ASSIGN_OR_RETURN(auto x, make_x()); returns the Status when make_x fails.
#define LG_ASSIGN_OR_RETURN(lhs, expr) LG_ASSIGN_OR_RETURN_IMPL(LG_CONCAT(lg_result_, __LINE__), lhs, expr)
#define LG_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                             \
  if (!tmp.is_ok()) return tmp.status();         \
  lhs = std::move(tmp).value()
