// Helpers shared by the test binaries: where ../shared is, and a skip when it is absent.
#pragma once

#include <gtest/gtest.h>

#include <string>

namespace loragate::testing {

// Absolute path of the shared test-data folder (../shared beside the repo),
// overridable with the LORAGATE_SHARED_DIR environment variable.
std::string shared_dir();
// True when `relative` exists under shared_dir().
bool shared_exists(const std::string& relative);
// A fresh empty temporary directory, removed by the caller (or left for the OS).
std::string make_temp_dir(const std::string& prefix);
// Flips the lowest bit of a file's last byte in place: a safetensors file
// still parses (it changes one weight), and its SHA-256 changes.
void flip_last_bit(const std::string& path);

}  // namespace loragate::testing

// Skips the current test, saying why, when a ../shared file is missing.
#define LG_REQUIRE_SHARED(relative)                                                        \
  do {                                                                                     \
    if (!::loragate::testing::shared_exists(relative))                                     \
      GTEST_SKIP() << "shared test data not found: " << ::loragate::testing::shared_dir() \
                   << "/" << (relative) << " (set LORAGATE_SHARED_DIR)";                   \
  } while (0)
