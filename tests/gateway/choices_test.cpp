// Several choices per request over a real loopback server: `n` on
// /v1/completions and /v1/chat/completions, and prompt lists on
// /v1/completions. Choice p * n + j is prompt p's j-th and samples with
// seed + j, so with a seed every choice equals a single request with that
// prompt and seed (the engine is batch invariant); streams carry each
// choice's index, finish chunk and the usage of all; bounds are 400s.
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "tests/gateway/gateway_fixture.h"

namespace loragate::testing {
namespace choices_test {

using nlohmann::json;

// Sampled (temperature 1), long enough that different seeds give different text.
json sampled_completion(const json& prompt, int64_t seed, int n) {
  return {{"model", kServed}, {"prompt", prompt}, {"max_tokens", 12}, {"temperature", 1},
          {"ignore_eos", true}, {"seed", seed},    {"n", n}};
}

json sampled_chat(int64_t seed, int n) {
  return {{"model", kServed},
          {"messages", json::array({{{"role", "user"}, {"content", "Tell me a story"}}})},
          {"max_tokens", 12},
          {"temperature", 1},
          {"ignore_eos", true},
          {"seed", seed},
          {"n", n}};
}

// What a stream said per choice index.
struct StreamedChoices {
  std::map<int, std::string> text;    // concatenated text (completions) or content (chat)
  std::map<int, int> finishes;        // chunks with a finish_reason
  std::map<int, bool> role_first;     // chat: the index's first chunk carried the role
  json usage;                         // the usage chunk's
  int done = 0;                       // [DONE] events
  bool done_last = false;
};

StreamedChoices read_stream(const std::string& body, bool chat) {
  StreamedChoices out;
  const std::vector<std::string> events = sse_events(body);
  for (size_t i = 0; i < events.size(); ++i) {
    if (events[i] == "[DONE]") {
      ++out.done;
      out.done_last = i + 1 == events.size();
      continue;
    }
    const json chunk = json::parse(events[i]);
    if (chunk["choices"].empty()) {
      out.usage = chunk["usage"];
      continue;
    }
    for (const json& c : chunk["choices"]) {
      const int index = c["index"].get<int>();
      if (chat) {
        if (!out.role_first.count(index)) out.role_first[index] = c["delta"].value("role", "") == "assistant";
        out.text[index] += c["delta"].value("content", "");
      } else {
        out.text[index] += c["text"].get<std::string>();
      }
      if (!c["finish_reason"].is_null()) ++out.finishes[index];
    }
  }
  return out;
}

class ChoicesTest : public GatewayTest {};

TEST(ChoicesUsage, EachPromptCountsOnceAndItsCachedTokensAtTheFewest) {
  auto result = [](size_t prompt, size_t output, int64_t cached) {
    GenerationResult r;
    r.prompt_ids.assign(prompt, 1);
    r.output_ids.assign(output, 2);
    r.cached_tokens = cached;
    return r;
  };
  // Two prompts (5 and 9 tokens), two choices each.
  const std::vector<GenerationResult> results = {result(5, 3, 0), result(5, 4, 5), result(9, 1, 8), result(9, 2, 4)};
  const UsageCounts two = count_usage(results, 2);
  EXPECT_EQ(two.prompt_tokens, 5 + 9);
  EXPECT_EQ(two.completion_tokens, 3 + 4 + 1 + 2);
  EXPECT_EQ(two.cached_tokens, 0 + 4);
  // The same results as four prompts of one choice each.
  const UsageCounts one = count_usage(results, 1);
  EXPECT_EQ(one.prompt_tokens, 5 + 5 + 9 + 9);
  EXPECT_EQ(one.cached_tokens, 0 + 5 + 8 + 4);
  const json usage = usage_json(two);
  EXPECT_EQ(usage["total_tokens"], 14 + 10);
  EXPECT_EQ(usage["prompt_tokens_details"]["cached_tokens"], 4);
}

// Usage minus the prefix cache's share: whichever of two equal requests runs second finds the
// first one's prompt blocks cached, so only the token counts can be compared.
json usage_without_cached(json usage) {
  usage.erase("prompt_tokens_details");
  return usage;
}

TEST_F(ChoicesTest, NChoicesAreIndexedDifferAndRepeatWithTheSeed) {
  const json body = sampled_completion(kGoldenPrompt, 1234, 3);
  ClientResponse first = post("/v1/completions", body);
  ASSERT_EQ(first.status, 200) << first.body;
  const json choices = first.json()["choices"];
  ASSERT_EQ(choices.size(), 3u) << first.body;
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(choices[i]["index"], i);
    EXPECT_EQ(choices[i]["finish_reason"], "length");
    texts.insert(choices[i]["text"].get<std::string>());
  }
  EXPECT_EQ(texts.size(), 3u) << "seeds 1234, 1235 and 1236 sampled the same text: " << first.body;
  const json usage = first.json()["usage"];
  EXPECT_EQ(usage["completion_tokens"], 3 * 12);

  ClientResponse again = post("/v1/completions", body);
  ASSERT_EQ(again.status, 200) << again.body;
  EXPECT_EQ(again.json()["choices"], choices);
  EXPECT_EQ(usage_without_cached(again.json()["usage"]), usage_without_cached(usage));

  // Choice j is the single request with seed + j; the prompt is counted once.
  for (int j = 0; j < 3; ++j) {
    ClientResponse single = post("/v1/completions", sampled_completion(kGoldenPrompt, 1234 + j, 1));
    ASSERT_EQ(single.status, 200) << single.body;
    EXPECT_EQ(single.json()["choices"][0]["text"], choices[j]["text"]) << "choice " << j;
    EXPECT_EQ(single.json()["usage"]["prompt_tokens"], usage["prompt_tokens"]);
  }
}

TEST_F(ChoicesTest, ChatNChoicesMatchSingleRequestsWithSeedPlusIndex) {
  ClientResponse r = post("/v1/chat/completions", sampled_chat(99, 3));
  ASSERT_EQ(r.status, 200) << r.body;
  const json choices = r.json()["choices"];
  ASSERT_EQ(choices.size(), 3u) << r.body;
  std::set<std::string> texts;
  for (int i = 0; i < 3; ++i) {
    EXPECT_EQ(choices[i]["index"], i);
    EXPECT_EQ(choices[i]["message"]["role"], "assistant");
    texts.insert(choices[i]["message"]["content"].get<std::string>());
    ClientResponse single = post("/v1/chat/completions", sampled_chat(99 + i, 1));
    ASSERT_EQ(single.status, 200) << single.body;
    EXPECT_EQ(single.json()["choices"][0]["message"]["content"], choices[i]["message"]["content"]) << "choice " << i;
    EXPECT_EQ(single.json()["usage"]["prompt_tokens"], r.json()["usage"]["prompt_tokens"]);
  }
  EXPECT_EQ(texts.size(), 3u) << r.body;
  EXPECT_EQ(r.json()["usage"]["completion_tokens"], 3 * 12);
}

TEST_F(ChoicesTest, WithoutASeedChoicesStillDiffer) {
  // Hot and long enough that four draws of stories260K's likeliest story all alike are out of reach.
  json body = sampled_completion(kGoldenPrompt, 0, 4);
  body.erase("seed");
  body["temperature"] = 2;
  body["max_tokens"] = 24;
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choices = r.json()["choices"];
  ASSERT_EQ(choices.size(), 4u) << r.body;
  std::set<std::string> texts;
  for (const json& c : choices) texts.insert(c["text"].get<std::string>());
  EXPECT_GE(texts.size(), 2u) << r.body;
}

TEST_F(ChoicesTest, PromptListsGiveEachPromptsChoicesInOrder) {
  const std::vector<json> lists = {json::array({kGoldenPrompt, "The little dog", "Lily"}),
                                   json::array({json::array({1, 400, 401, 402}), json::array({1, 7, 8}),
                                                json::array({1, 30, 31, 32, 33})})};
  for (const json& prompts : lists) {
    ClientResponse r = post("/v1/completions", sampled_completion(prompts, 77, 2));
    ASSERT_EQ(r.status, 200) << r.body;
    const json choices = r.json()["choices"];
    ASSERT_EQ(choices.size(), 6u) << r.body;
    int64_t prompt_tokens = 0;
    for (int p = 0; p < 3; ++p) {
      for (int j = 0; j < 2; ++j) {
        const int index = p * 2 + j;
        EXPECT_EQ(choices[index]["index"], index);
        ClientResponse single = post("/v1/completions", sampled_completion(prompts[p], 77 + j, 1));
        ASSERT_EQ(single.status, 200) << single.body;
        EXPECT_EQ(single.json()["choices"][0]["text"], choices[index]["text"])
            << "prompt " << p << " choice " << j << " of " << prompts.dump();
        if (j == 0) prompt_tokens += single.json()["usage"]["prompt_tokens"].get<int64_t>();
      }
    }
    // vLLM's usage: each prompt's tokens once, every choice's generated tokens.
    EXPECT_EQ(r.json()["usage"]["prompt_tokens"], prompt_tokens);
    EXPECT_EQ(r.json()["usage"]["completion_tokens"], 6 * 12);
    EXPECT_EQ(r.json()["usage"]["total_tokens"], prompt_tokens + 6 * 12);
  }
}

TEST_F(ChoicesTest, EchoPutsEachChoicesOwnPromptFirst) {
  json body = sampled_completion(json::array({"The little dog", "Lily"}), 5, 2);
  body["echo"] = true;
  body["max_tokens"] = 3;
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const json choices = r.json()["choices"];
  ASSERT_EQ(choices.size(), 4u);
  for (int i = 0; i < 4; ++i) {
    const std::string prompt = i < 2 ? "The little dog" : "Lily";
    EXPECT_EQ(choices[i]["text"].get<std::string>().rfind(prompt, 0), 0u) << choices[i].dump();
  }
}

TEST_F(ChoicesTest, StreamedChoicesEachFinishAndMatchTheWholeAnswer) {
  json body = sampled_completion(json::array({kGoldenPrompt, "Lily"}), 31, 2);
  ClientResponse whole = post("/v1/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  ClientResponse r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const StreamedChoices s = read_stream(r.body, /*chat=*/false);
  ASSERT_EQ(s.text.size(), 4u) << r.body;
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(s.text.at(i), whole.json()["choices"][i]["text"]) << "choice " << i;
    EXPECT_EQ(s.finishes.count(i) ? s.finishes.at(i) : 0, 1) << "choice " << i;
  }
  EXPECT_EQ(usage_without_cached(s.usage), usage_without_cached(whole.json()["usage"]));
  EXPECT_EQ(s.done, 1);
  EXPECT_TRUE(s.done_last);
}

TEST_F(ChoicesTest, ChatStreamGivesEveryChoiceItsRoleFirst) {
  json body = sampled_chat(8, 3);
  ClientResponse whole = post("/v1/chat/completions", body);
  ASSERT_EQ(whole.status, 200) << whole.body;
  body["stream"] = true;
  body["stream_options"] = {{"include_usage", true}};
  ClientResponse r = post("/v1/chat/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  const StreamedChoices s = read_stream(r.body, /*chat=*/true);
  ASSERT_EQ(s.text.size(), 3u) << r.body;
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(s.role_first.at(i)) << "choice " << i;
    EXPECT_EQ(s.text.at(i), whole.json()["choices"][i]["message"]["content"]) << "choice " << i;
    EXPECT_EQ(s.finishes.count(i) ? s.finishes.at(i) : 0, 1) << "choice " << i;
  }
  EXPECT_EQ(s.usage["completion_tokens"], 3 * 12);
  EXPECT_EQ(usage_without_cached(s.usage), usage_without_cached(whole.json()["usage"]));
  EXPECT_EQ(s.done, 1);
  EXPECT_TRUE(s.done_last);
}

TEST_F(ChoicesTest, BoundsOnChoicesAndPromptsAre400s) {
  struct Case {
    json patch;
    std::string param;
    std::string needle;
  };
  json many = json::array();
  for (int i = 0; i < 65; ++i) many.push_back("x");
  json sixty_four = json::array();
  for (int i = 0; i < 64; ++i) sixty_four.push_back(json::array({1, 5}));
  const std::vector<Case> cases = {
      {{{"n", 0}}, "n", "n must be an integer from 1 to 16"},
      {{{"n", 17}}, "n", "n must be an integer from 1 to 16"},
      {{{"n", "two"}}, "n", "n must be"},
      {{{"prompt", json::array()}}, "prompt", "prompt must be"},
      {{{"prompt", json::array({json::array({1, 2}), "x"})}}, "prompt", "prompt must be"},
      {{{"prompt", many}}, "prompt", "at most 64 prompts"},
      {{{"prompt", sixty_four}, {"n", 3}}, "n", "prompts times n must be at most 128"},
      {{{"best_of", 2}}, "best_of", "best_of is not supported"},
      {{{"best_of", 4}, {"n", 3}}, "best_of", "must be 1 or equal to n"},
  };
  for (const Case& c : cases) {
    json body = sampled_completion(kGoldenPrompt, 1, 1);
    body.update(c.patch);
    ClientResponse r = post("/v1/completions", body);
    EXPECT_EQ(r.status, 400) << c.patch.dump() << " -> " << r.body;
    EXPECT_EQ(r.json()["error"]["param"], c.param) << c.patch.dump();
    EXPECT_NE(r.body.find(c.needle), std::string::npos) << c.patch.dump() << " -> " << r.body;
  }
  json chat = sampled_chat(1, 17);
  ClientResponse r = post("/v1/chat/completions", chat);
  EXPECT_EQ(r.status, 400) << r.body;
  EXPECT_EQ(r.json()["error"]["param"], "n");

  // best_of equal to n is plain n; 128 sequences are allowed.
  json body = sampled_completion(kGoldenPrompt, 1, 3);
  body["best_of"] = 3;
  body["max_tokens"] = 1;
  EXPECT_EQ(post("/v1/completions", body).status, 200);
  body = sampled_completion(json::array({json::array({1, 5}), json::array({1, 6})}), 1, 16);
  body["max_tokens"] = 1;
  r = post("/v1/completions", body);
  ASSERT_EQ(r.status, 200) << r.body;
  EXPECT_EQ(r.json()["choices"].size(), 32u);
}

TEST_F(ChoicesTest, ADisconnectCancelsEveryChoice) {
  // 128 sequences of 500 tokens: 64 run at once (max_num_seqs), 64 wait; all of
  // them would take seconds.
  json body = sampled_completion(json::array({kGoldenPrompt, "a", "b", "c", "d", "e", "f", "g"}), 3, 16);
  body["max_tokens"] = 500;
  body["stream"] = true;
  const int64_t generated_before = loop_->stats().generated_tokens;
  TestConnection holder(port_);
  ClientResponse head = holder.send_and_read_header(http::verb::post, "/v1/completions", body.dump());
  ASSERT_EQ(head.status, 200) << head.error;
  holder.read_body_until("\"text\"");
  EXPECT_EQ(gateway_->in_flight(), 1u);  // one HTTP request, however many choices
  holder.close();
  EXPECT_TRUE(engine_drained(std::chrono::seconds(5)));
  const int64_t generated = loop_->stats().generated_tokens - generated_before;
  // Had the 64 waiting choices not been cancelled they would have made 64 x 500 tokens alone.
  EXPECT_LT(generated, 64 * 500) << "choices ran on after the client left";
  // The sink is let go once its last choice's end is in.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (gateway_->in_flight() != 0 && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  EXPECT_EQ(gateway_->in_flight(), 0u);
}

}  // namespace choices_test
}  // namespace loragate::testing
