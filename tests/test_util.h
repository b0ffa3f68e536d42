// Helpers shared by the test binaries: where ../shared is, and what a test does
// when a fixture there is absent (skip it; fail it under CI=true).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <utility>

namespace loragate::testing {

// Absolute path of the shared test-data folder (../shared beside the repo),
// overridable with the LORAGATE_SHARED_DIR environment variable.
std::string shared_dir();
// True when `relative` exists under shared_dir().
bool shared_exists(const std::string& relative);
// True when the environment variable CI is "true": there a missing fixture is a
// failure, so that CI can never pass with tests that did not run.
bool in_ci();
// What a test says when the fixture `relative` (under shared_dir()) is missing.
std::string missing_fixture_message(const std::string& relative);
// A fresh empty temporary directory, removed by the caller (or left for the OS).
std::string make_temp_dir(const std::string& prefix);
// Flips the lowest bit of a file's last byte in place: a safetensors file
// still parses (it changes one weight), and its SHA-256 changes.
void flip_last_bit(const std::string& path);
// Runs `command` in a shell: its exit status (-1 when it did not exit
// normally) and what it wrote to stdout and stderr.
std::pair<int, std::string> run_command(const std::string& command);

}  // namespace loragate::testing

// Ends the current test because the ../shared fixture `relative` is missing:
// a skip, or a failure when CI=true. Only for fixtures: a missing device or
// CPU feature is a plain GTEST_SKIP everywhere.
#define LG_FIXTURE_MISSING(relative)                                                   \
  do {                                                                                 \
    if (::loragate::testing::in_ci()) {                                                \
      GTEST_FAIL() << ::loragate::testing::missing_fixture_message(relative);          \
    } else {                                                                           \
      GTEST_SKIP() << ::loragate::testing::missing_fixture_message(relative);          \
    }                                                                                  \
  } while (0)

// LG_FIXTURE_MISSING(relative) unless that ../shared file exists.
#define LG_REQUIRE_SHARED(relative)                                                    \
  do {                                                                                 \
    if (!::loragate::testing::shared_exists(relative)) LG_FIXTURE_MISSING(relative);   \
  } while (0)
