#include "gateway/openai/tool_call_parser.h"

#include <nlohmann/json.hpp>

namespace loragate {
namespace {

using ojson = nlohmann::ordered_json;

constexpr std::string_view kHermesOpen = "<tool_call>";
constexpr std::string_view kHermesClose = "</tool_call>";
constexpr std::string_view kPythonTag = "<|python_tag|>";
// kJsonList's fixed pieces: the grammar writes them exactly so (compact JSON).
constexpr std::string_view kListOpen = "[";
constexpr std::string_view kCallHead = "{\"name\":\"";
constexpr std::string_view kArgsHead = ",\"arguments\":";

}  // namespace

void JsonNesting::read(char c) {
  if (in_string) {
    if (escaped) {
      escaped = false;
    } else if (c == '\\') {
      escaped = true;
    } else if (c == '"') {
      in_string = false;
    }
  } else if (c == '"') {
    in_string = true;
  } else if (c == '{' || c == '[') {
    ++depth;
  } else if (c == '}' || c == ']') {
    --depth;
  }
}

namespace {

bool is_blank(char c) { return c == ' ' || c == '\n' || c == '\t' || c == '\r'; }

// The length of the longest end of `text` that `marker` starts with (a
// marker that may be arriving).
size_t partial_marker(std::string_view text, std::string_view marker) {
  for (size_t n = std::min(text.size(), marker.size() - 1); n > 0; --n) {
    if (marker.starts_with(text.substr(text.size() - n))) return n;
  }
  return 0;
}

std::string_view trim_blanks(std::string_view s) {
  while (!s.empty() && is_blank(s.front())) s.remove_prefix(1);
  while (!s.empty() && is_blank(s.back())) s.remove_suffix(1);
  return s;
}

// Where the JSON object or array starting at text[0] ends (one past its
// closing bracket), or npos when it does not end in `text`.
size_t json_value_end(std::string_view text) {
  JsonNesting nesting;
  for (size_t i = 0; i < text.size(); ++i) {
    nesting.read(text[i]);
    if (nesting.depth == 0 && !nesting.in_string) return i + 1;  // text[0] opened it: this closed it
  }
  return std::string_view::npos;
}

}  // namespace

ToolCallScanner::ToolCallScanner(ToolCallSyntax syntax, std::string function)
    : syntax_(syntax), function_(std::move(function)) {}

std::vector<ToolCallEvent> ToolCallScanner::feed(std::string_view text) {
  std::vector<ToolCallEvent> out;
  if (finished_ || text.empty()) return out;
  switch (syntax_) {
    case ToolCallSyntax::kNone: emit_content(std::string(text), &out); break;
    case ToolCallSyntax::kArguments: feed_arguments(text, &out); break;
    case ToolCallSyntax::kJsonList: feed_json_list(text, &out); break;
    case ToolCallSyntax::kHermes: feed_hermes(text, &out); break;
    case ToolCallSyntax::kLlama3Json: feed_llama3(text, &out); break;
  }
  return out;
}

void ToolCallScanner::emit_content(std::string text, std::vector<ToolCallEvent>* out) {
  if (text.empty()) return;
  if (!out->empty() && out->back().kind == ToolCallEvent::Kind::kContent) {
    out->back().text += text;
  } else {
    out->push_back({ToolCallEvent::Kind::kContent, 0, std::move(text)});
  }
}

void ToolCallScanner::feed_arguments(std::string_view text, std::vector<ToolCallEvent>* out) {
  if (calls_ == 0) out->push_back({ToolCallEvent::Kind::kCallBegin, calls_++, function_});
  out->push_back({ToolCallEvent::Kind::kArguments, 0, std::string(text)});
}

void ToolCallScanner::feed_json_list(std::string_view text, std::vector<ToolCallEvent>* out) {
  std::string args;  // this piece's arguments bytes, given out at its end
  auto flush_args = [&] {
    if (!args.empty()) out->push_back({ToolCallEvent::Kind::kArguments, calls_ - 1, std::move(args)});
    args.clear();
  };
  // A fixed piece: true once all of it is matched; a mismatch makes the rest content.
  auto expect = [&](std::string_view piece, char c, ListAt next) {
    if (c != piece[matched_]) return false;
    held_ += c;
    if (++matched_ == piece.size()) {
      matched_ = 0;
      list_at_ = next;
    }
    return true;
  };
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (content_only_) {
      emit_content(std::string(text.substr(i)), out);
      return;
    }
    bool ok = true;
    switch (list_at_) {
      case ListAt::kOpen: ok = expect(kListOpen, c, ListAt::kCallHead); break;
      case ListAt::kCallHead:
        ok = expect(kCallHead, c, ListAt::kName);
        if (list_at_ == ListAt::kName) name_.clear();
        break;
      case ListAt::kName:
        held_ += c;
        if (c == '"') {
          list_at_ = ListAt::kArgsHead;
        } else {
          name_ += c;
        }
        break;
      case ListAt::kArgsHead:
        ok = expect(kArgsHead, c, ListAt::kArgs);
        if (ok && list_at_ == ListAt::kArgs) {
          out->push_back({ToolCallEvent::Kind::kCallBegin, calls_++, name_});
          held_.clear();
          nesting_ = {};
        }
        break;
      case ListAt::kArgs:
        if (nesting_.closes_outer(c)) {  // the call object closes
          flush_args();
          list_at_ = ListAt::kAfterCall;
          break;
        }
        nesting_.read(c);
        args += c;
        break;
      case ListAt::kAfterCall:
        if (c == ',') {
          list_at_ = ListAt::kCallHead;
        } else if (c == ']') {
          list_at_ = ListAt::kDone;
        } else {
          ok = false;
        }
        break;
      case ListAt::kDone: ok = false; break;
    }
    if (!ok) {  // not the constrained form after all: the text so far and the rest are content
      content_only_ = true;
      flush_args();
      emit_content(std::exchange(held_, {}) + std::string(text.substr(i)), out);
      return;
    }
  }
  flush_args();
}

void ToolCallScanner::feed_hermes(std::string_view text, std::vector<ToolCallEvent>* out) {
  held_ += text;
  for (;;) {
    if (in_call_) {
      const size_t close = held_.find(kHermesClose);
      if (close == std::string::npos) return;
      const std::string body = held_.substr(0, close);
      // The blank lines around a call are layout; around a block that is no call, content.
      after_call_ = emit_json_call(body, out);
      if (!after_call_) emit_content(blank_before_ + std::string(kHermesOpen) + body + std::string(kHermesClose), out);
      blank_before_.clear();
      held_.erase(0, close + kHermesClose.size());
      in_call_ = false;
      continue;
    }
    if (after_call_) {
      size_t blanks = 0;
      while (blanks < held_.size() && is_blank(held_[blanks])) ++blanks;
      held_.erase(0, blanks);
      if (!held_.empty()) after_call_ = false;
    }
    const size_t open = held_.find(kHermesOpen);
    if (open != std::string::npos) {
      size_t text_end = open;
      while (text_end > 0 && is_blank(held_[text_end - 1])) --text_end;
      emit_content(held_.substr(0, text_end), out);
      blank_before_ = held_.substr(text_end, open - text_end);
      held_.erase(0, open + kHermesOpen.size());
      in_call_ = true;
      continue;
    }
    // Hold back a marker that may be arriving, and the blanks before it.
    size_t keep = partial_marker(held_, kHermesOpen);
    while (keep < held_.size() && is_blank(held_[held_.size() - keep - 1])) ++keep;
    emit_content(held_.substr(0, held_.size() - keep), out);
    held_.erase(0, held_.size() - keep);
    return;
  }
}

void ToolCallScanner::feed_llama3(std::string_view text, std::vector<ToolCallEvent>* out) {
  if (content_only_) return emit_content(std::string(text), out);
  held_ += text;
  if (decided_) return;  // a call is being read: all of it waits for the end
  const std::string_view start = trim_blanks(held_);
  if (start.empty()) return;
  if (start.front() == '{' || start.starts_with(kPythonTag)) {
    decided_ = true;
    return;
  }
  if (kPythonTag.starts_with(start)) return;  // the tag may be arriving
  content_only_ = true;
  emit_content(std::exchange(held_, {}), out);
}

bool ToolCallScanner::emit_json_call(std::string_view json_text, std::vector<ToolCallEvent>* out) {
  const ojson call = ojson::parse(json_text, nullptr, /*allow_exceptions=*/false);
  if (!call.is_object() || !call.contains("name") || !call["name"].is_string()) return false;
  const char* key = call.contains("arguments") ? "arguments" : call.contains("parameters") ? "parameters" : nullptr;
  std::string arguments = "{}";
  if (key != nullptr) {
    const ojson& a = call[key];
    if (a.is_string()) {  // some models write the arguments as a JSON string
      arguments = a.get<std::string>();
    } else if (a.is_object()) {
      arguments = a.dump(-1, ' ', false, ojson::error_handler_t::replace);
    } else {
      return false;
    }
  }
  const int32_t index = calls_++;
  out->push_back({ToolCallEvent::Kind::kCallBegin, index, call["name"].get<std::string>()});
  out->push_back({ToolCallEvent::Kind::kArguments, index, std::move(arguments)});
  return true;
}

std::vector<ToolCallEvent> ToolCallScanner::finish() {
  std::vector<ToolCallEvent> out;
  if (finished_) return out;
  finished_ = true;
  switch (syntax_) {
    case ToolCallSyntax::kNone: break;
    case ToolCallSyntax::kArguments:
      if (calls_ == 0) out.push_back({ToolCallEvent::Kind::kCallBegin, calls_++, function_});
      break;
    case ToolCallSyntax::kJsonList:
      // A list cut short inside a head: what it had is content (no call began with it).
      if (list_at_ != ListAt::kArgs) emit_content(std::exchange(held_, {}), &out);
      break;
    case ToolCallSyntax::kHermes:
      if (in_call_) {  // the output ended inside a block: a call if it is whole JSON
        if (!emit_json_call(trim_blanks(held_), &out)) emit_content(blank_before_ + std::string(kHermesOpen) + held_, &out);
      } else if (calls_ == 0 || !trim_blanks(held_).empty()) {
        emit_content(held_, &out);
      }
      held_.clear();
      break;
    case ToolCallSyntax::kLlama3Json: {
      if (content_only_ || held_.empty()) break;
      // One or more calls separated by ';', or else all of it is content.
      std::string_view rest = trim_blanks(held_);
      if (rest.starts_with(kPythonTag)) rest = trim_blanks(rest.substr(kPythonTag.size()));
      std::vector<ToolCallEvent> calls;
      const int32_t before = calls_;
      bool all_calls = !rest.empty();
      while (all_calls && !rest.empty()) {
        const size_t end = rest.front() == '{' ? json_value_end(rest) : std::string_view::npos;
        all_calls = end != std::string_view::npos && emit_json_call(rest.substr(0, end), &calls);
        if (!all_calls) break;
        rest = trim_blanks(rest.substr(end));
        if (!rest.empty() && rest.front() == ';') rest = trim_blanks(rest.substr(1));
      }
      if (all_calls) {
        out.insert(out.end(), calls.begin(), calls.end());
      } else {
        calls_ = before;
        emit_content(held_, &out);
      }
      held_.clear();
      break;
    }
  }
  return out;
}

void fold_tool_call_events(const std::vector<ToolCallEvent>& events, ToolCallOutput* out) {
  for (const ToolCallEvent& e : events) {
    switch (e.kind) {
      case ToolCallEvent::Kind::kContent:
        out->content = out->content.value_or("") + e.text;
        break;
      case ToolCallEvent::Kind::kCallBegin:
        out->calls.push_back({e.text, ""});
        break;
      case ToolCallEvent::Kind::kArguments:
        out->calls[static_cast<size_t>(e.call)].arguments += e.text;
        break;
    }
  }
}

ToolCallOutput parse_tool_calls(ToolCallSyntax syntax, const std::string& function, std::string_view text) {
  ToolCallScanner scanner(syntax, function);
  ToolCallOutput out;
  fold_tool_call_events(scanner.feed(text), &out);
  fold_tool_call_events(scanner.finish(), &out);
  // OpenAI's shape: content is null beside calls unless there was some.
  if (!out.calls.empty() && out.content && trim_blanks(*out.content).empty()) out.content.reset();
  if (out.calls.empty() && !out.content) out.content = "";
  return out;
}

}  // namespace loragate
