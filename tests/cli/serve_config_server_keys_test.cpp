// server.max_stream_buffer_bytes, server.public_listings and
// server.tool_call_parser: read from YAML,
// defaults as documented in configs/loragate.yaml, bad values name the key.
#include <gtest/gtest.h>

#include "cli/serve_config.h"

namespace loragate {
namespace {

TEST(ServeConfigServerKeysTest, StreamBufferAndPublicListings) {
  auto example = ServeConfig::load(std::string(LORAGATE_SOURCE_DIR) + "/configs/loragate.yaml");
  ASSERT_TRUE(example.is_ok()) << example.status().to_string();
  EXPECT_EQ(example->server.max_stream_buffer_bytes, ServerOptions{}.max_stream_buffer_bytes);
  EXPECT_EQ(example->server.public_listings, ServerOptions{}.public_listings);

  auto c = ServeConfig::parse("server: {max_stream_buffer_bytes: 65536, public_listings: false}\n", "test.yaml");
  ASSERT_TRUE(c.is_ok()) << c.status().to_string();
  EXPECT_EQ(c->server.max_stream_buffer_bytes, 65536u);
  EXPECT_FALSE(c->server.public_listings);

  auto small = ServeConfig::parse("server: {max_stream_buffer_bytes: 10}\n", "bad.yaml");
  EXPECT_NE(small.status().message().find("server.max_stream_buffer_bytes"), std::string::npos)
      << small.status().message();
  auto typo = ServeConfig::parse("server: {public_listings: sometimes}\n", "bad.yaml");
  EXPECT_NE(typo.status().message().find("server.public_listings"), std::string::npos) << typo.status().message();
}

TEST(ServeConfigServerKeysTest, ToolCallParser) {
  auto example = ServeConfig::load(std::string(LORAGATE_SOURCE_DIR) + "/configs/loragate.yaml");
  ASSERT_TRUE(example.is_ok()) << example.status().to_string();
  EXPECT_EQ(example->server.tool_call_parser, "auto");
  for (const char* name : {"auto", "hermes", "llama3_json", "none"}) {
    auto c = ServeConfig::parse(std::string("server: {tool_call_parser: ") + name + "}\n", "test.yaml");
    ASSERT_TRUE(c.is_ok()) << c.status().to_string();
    EXPECT_EQ(c->server.tool_call_parser, name);
  }
  auto bad = ServeConfig::parse("server: {tool_call_parser: mistral}\n", "bad.yaml");
  ASSERT_FALSE(bad.is_ok());
  EXPECT_NE(bad.status().message().find("server.tool_call_parser"), std::string::npos) << bad.status().message();
  EXPECT_NE(bad.status().message().find("mistral"), std::string::npos) << bad.status().message();
}

}  // namespace
}  // namespace loragate
