// Sha256: the FIPS 180-4 / NIST example vectors, incremental feeding in odd
// pieces (every padding boundary), and sha256_file on real files.
#include "common/sha256.h"

#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "tests/test_util.h"

namespace loragate {
namespace {

TEST(Sha256Test, KnownVectors) {
  EXPECT_EQ(sha256_hex(""), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  EXPECT_EQ(sha256_hex("abc"), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  EXPECT_EQ(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq"),
            "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  EXPECT_EQ(sha256_hex("abcdefghbcdefghicdefghijdefghijkefghijklfghijklmghijklmn"
                       "hijklmnoijklmnopjklmnopqklmnopqrlmnopqrsmnopqrstnopqrstu"),
            "cf5b16a778af8380036ce59e7b0492370b249b11e8f07a51afac45037afee9d1");
  EXPECT_EQ(sha256_hex("The quick brown fox jumps over the lazy dog"),
            "d7a8fbb307d7809469ca9abcb0082e4f8d5651e46d3cdb762d02d0bf37c9e592");
}

TEST(Sha256Test, MillionAs) {
  EXPECT_EQ(sha256_hex(std::string(1000000, 'a')),
            "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
  // The same message fed in uneven pieces.
  Sha256 hasher;
  const std::string piece(997, 'a');
  size_t fed = 0;
  while (fed + piece.size() <= 1000000) {
    hasher.update(piece);
    fed += piece.size();
  }
  hasher.update(std::string(1000000 - fed, 'a'));
  EXPECT_EQ(hasher.finish_hex(), "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST(Sha256Test, IncrementalEqualsOneShotAtEveryLength) {
  // Lengths around the 55/56/64-byte padding boundaries, split at every point.
  std::string message;
  for (int i = 0; i < 130; ++i) message.push_back(static_cast<char>('!' + (i * 7) % 90));
  for (size_t len = 0; len <= message.size(); ++len) {
    const std::string m = message.substr(0, len);
    const std::string expected = sha256_hex(m);
    for (size_t split = 0; split <= len; split += (len < 70 ? 1 : 13)) {
      Sha256 hasher;
      hasher.update(m.substr(0, split));
      hasher.update(m.substr(split));
      ASSERT_EQ(hasher.finish_hex(), expected) << "len " << len << " split " << split;
    }
  }
}

TEST(Sha256Test, FinishResetsForTheNextMessage) {
  Sha256 hasher;
  hasher.update("something else");
  (void)hasher.finish();
  hasher.update("abc");
  EXPECT_EQ(hasher.finish_hex(), "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
}

TEST(Sha256Test, File) {
  const std::string dir = testing::make_temp_dir("lg-sha256");
  ASSERT_FALSE(dir.empty());
  const std::string path = dir + "/adapter_model.safetensors";
  {
    std::ofstream out(path, std::ios::binary);
    // 3 MiB + 5 bytes: several read chunks and a short last one.
    const std::string a(1000000, 'a');
    for (int i = 0; i < 3; ++i) out << a;
    out << std::string(145733, 'a');
  }
  auto digest = sha256_file(path);
  ASSERT_TRUE(digest.is_ok()) << digest.status().to_string();
  EXPECT_EQ(*digest, sha256_hex(std::string(3145733, 'a')));

  const std::string empty = dir + "/empty";
  std::ofstream(empty).close();
  EXPECT_EQ(sha256_file(empty).value(), "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");

  auto missing = sha256_file(dir + "/nope.safetensors");
  EXPECT_EQ(missing.status().code(), StatusCode::kNotFound);
  EXPECT_NE(missing.status().message().find("nope.safetensors"), std::string::npos);

  auto directory = sha256_file(dir);  // opens, then fails to read
  EXPECT_EQ(directory.status().code(), StatusCode::kIoError) << directory.status().to_string();
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace loragate
