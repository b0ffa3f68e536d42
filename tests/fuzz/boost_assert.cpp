// Boost assertions in the fuzz build (BOOST_ENABLE_ASSERT_HANDLER): abort as
// assert() would, except for one known-wrong assertion of Beast 1.74.
//
// basic_parser.ipp's parse_chunk_header asserts n >= 5 when a put() resumes
// after the final chunk's "0\r\n"; two bytes (the "\r\n" ending the trailer)
// are a valid remainder, and the code after the assertion correctly answers
// need_more. Beast fixed the assertion in boostorg/beast#2861 (2024); release
// builds (NDEBUG) never check it.
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace boost {

void assertion_failed(char const* expr, char const* function, char const* file, long line) {
  if (std::strcmp(expr, "n >= 5") == 0 && std::strstr(file, "beast/http/impl/basic_parser.ipp") != nullptr) return;
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion `%s' failed.\n", file, line, function, expr);
  std::abort();
}

void assertion_failed_msg(char const* expr, char const* msg, char const* function, char const* file, long line) {
  std::fprintf(stderr, "%s:%ld: %s: Boost assertion `%s' failed: %s\n", file, line, function, expr, msg);
  std::abort();
}

}  // namespace boost
