// Reading tool calls back out of text: each syntax on its own forms, text
// that is not a call staying content, and a stream cut at every byte giving
// what the whole text gives.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include "gateway/openai/tool_call_parser.h"

namespace loragate {
namespace {

using Syntax = ToolCallSyntax;

// The output folded from `text` fed in pieces of `piece` bytes.
ToolCallOutput fed_in_pieces(Syntax syntax, std::string_view text, size_t piece) {
  ToolCallScanner scanner(syntax, "fn");
  ToolCallOutput out;
  for (size_t at = 0; at < text.size(); at += piece) fold_tool_call_events(scanner.feed(text.substr(at, piece)), &out);
  fold_tool_call_events(scanner.finish(), &out);
  return out;
}

// Every piece size gives the calls and the content (blank-trimmed) the whole text gives.
void expect_stream_agrees(Syntax syntax, std::string_view text) {
  const ToolCallOutput whole = parse_tool_calls(syntax, "fn", text);
  for (size_t piece = 1; piece <= text.size(); ++piece) {
    const ToolCallOutput part = fed_in_pieces(syntax, text, piece);
    ASSERT_EQ(part.calls.size(), whole.calls.size()) << "piece " << piece << ": " << text;
    for (size_t k = 0; k < whole.calls.size(); ++k) {
      EXPECT_EQ(part.calls[k].name, whole.calls[k].name) << "piece " << piece;
      EXPECT_EQ(part.calls[k].arguments, whole.calls[k].arguments) << "piece " << piece;
    }
    EXPECT_EQ(part.content.value_or(""), whole.content.value_or("")) << "piece " << piece << ": " << text;
  }
}

TEST(ToolCallParserTest, ANamedCallIsTheWholeOutput) {
  const ToolCallOutput out = parse_tool_calls(Syntax::kArguments, "get_weather", R"({"city":"Oslo"})");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"city":"Oslo"})");
  EXPECT_FALSE(out.content.has_value());
  // Cut short, the call is still there, its arguments as far as they got.
  EXPECT_EQ(parse_tool_calls(Syntax::kArguments, "f", R"({"ci)").calls[0].arguments, R"({"ci)");
  expect_stream_agrees(Syntax::kArguments, R"({"a":[1,{"b":"}"}]})");
}

TEST(ToolCallParserTest, AJsonListGivesEachCallWithItsArguments) {
  const std::string text = R"([{"name":"a","arguments":{"x":"}]{\"","y":[1,2]}},{"name":"b-2","arguments":{}}])";
  const ToolCallOutput out = parse_tool_calls(Syntax::kJsonList, "", text);
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "a");
  EXPECT_EQ(out.calls[0].arguments, R"({"x":"}]{\"","y":[1,2]})");
  EXPECT_EQ(out.calls[1].name, "b-2");
  EXPECT_EQ(out.calls[1].arguments, "{}");
  EXPECT_FALSE(out.content.has_value());
  expect_stream_agrees(Syntax::kJsonList, text);
}

TEST(ToolCallParserTest, AJsonListCutShortKeepsWhatItHad) {
  ToolCallOutput out = parse_tool_calls(Syntax::kJsonList, "", R"([{"name":"a","arguments":{"x":1)");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, R"({"x":1)");
  out = parse_tool_calls(Syntax::kJsonList, "", R"([{"name":"a","arguments":{}},{"na)");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.content.value_or(""), R"({"na)");  // a head with no call yet is not dropped
  // Text that is not the list at all is content, every byte of it.
  out = parse_tool_calls(Syntax::kJsonList, "", R"([{"nope": 1}])");
  EXPECT_TRUE(out.calls.empty());
  EXPECT_EQ(out.content, R"([{"nope": 1}])");
  expect_stream_agrees(Syntax::kJsonList, R"([{"name":"a","arguments":{}}]tail)");
}

TEST(ToolCallParserTest, HermesBlocksAreCallsAndTheTextAroundThemContent) {
  const std::string text =
      "Let me look.\n<tool_call>\n{\"name\": \"get_weather\", \"arguments\": {\"zeta\": \"Paris\", \"alpha\": 2}}\n"
      "</tool_call>\n<tool_call>{\"name\": \"add\", \"arguments\": \"{\\\"a\\\": 1}\"}</tool_call>\n";
  const ToolCallOutput out = parse_tool_calls(Syntax::kHermes, "", text);
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "get_weather");
  EXPECT_EQ(out.calls[0].arguments, R"({"zeta":"Paris","alpha":2})") << "the written key order is kept";
  EXPECT_EQ(out.calls[1].name, "add");
  EXPECT_EQ(out.calls[1].arguments, R"({"a": 1})") << "arguments written as a string are taken as they are";
  EXPECT_EQ(out.content, "Let me look.");
  expect_stream_agrees(Syntax::kHermes, text);
}

TEST(ToolCallParserTest, HermesTextThatIsNoCallStaysContent) {
  for (const std::string text : {"a < b, and <tool", "plain\n\n", "<tool_call>not json</tool_call> after",
                                 "x <tool_call>{\"name\": \"f\"", "<tool_call>{\"arguments\": {}}</tool_call>"}) {
    const ToolCallOutput out = parse_tool_calls(Syntax::kHermes, "", text);
    EXPECT_TRUE(out.calls.empty()) << text;
    EXPECT_EQ(out.content, text);
    expect_stream_agrees(Syntax::kHermes, text);
  }
  // A block the output ended inside is a call when it is whole JSON.
  const ToolCallOutput out = parse_tool_calls(Syntax::kHermes, "", "<tool_call>\n{\"name\": \"f\"}\n");
  ASSERT_EQ(out.calls.size(), 1u);
  EXPECT_EQ(out.calls[0].arguments, "{}");
}

TEST(ToolCallParserTest, Llama3JsonCallsOrContent) {
  const std::string text =
      "<|python_tag|>{\"name\": \"f\", \"parameters\": {\"q\": \"a;b}\"}}; {\"name\": \"g\", \"parameters\": {}}";
  ToolCallOutput out = parse_tool_calls(Syntax::kLlama3Json, "", text);
  ASSERT_EQ(out.calls.size(), 2u);
  EXPECT_EQ(out.calls[0].name, "f");
  EXPECT_EQ(out.calls[0].arguments, R"({"q":"a;b}"})");
  EXPECT_EQ(out.calls[1].name, "g");
  EXPECT_FALSE(out.content.has_value());
  expect_stream_agrees(Syntax::kLlama3Json, text);
  expect_stream_agrees(Syntax::kLlama3Json, " {\"name\": \"f\", \"parameters\": {}}");
  for (const std::string plain : {"Hello {there}", "{\"name\": \"f\"} and more", "{not json", "  "}) {
    out = parse_tool_calls(Syntax::kLlama3Json, "", plain);
    EXPECT_TRUE(out.calls.empty()) << plain;
    EXPECT_EQ(out.content, plain);
    expect_stream_agrees(Syntax::kLlama3Json, plain);
  }
}

TEST(ToolCallParserTest, WithoutToolsEverythingIsContent) {
  EXPECT_EQ(parse_tool_calls(Syntax::kNone, "", "<tool_call>{\"name\": \"f\"}</tool_call>").content,
            "<tool_call>{\"name\": \"f\"}</tool_call>");
  EXPECT_EQ(parse_tool_calls(Syntax::kNone, "", "").content, "");
}

}  // namespace
}  // namespace loragate
