#include "evaluator/metrics.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <algorithm>
#include <cmath>
#include <unordered_map>
#include <unordered_set>

#include "tokenizer/unicode.h"

namespace loragate::eval {
namespace {

// Python's str.isspace(), which str.split(), str.strip() and re's \s use.
bool is_py_space(char32_t c) {
  return (c >= 0x09 && c <= 0x0D) || (c >= 0x1C && c <= 0x20) || c == 0x85 || c == 0xA0 || c == 0x1680 ||
         (c >= 0x2000 && c <= 0x200A) || c == 0x2028 || c == 0x2029 || c == 0x202F || c == 0x205F ||
         c == 0x3000;
}

// Length of the whitespace character at s[i], 0 when there is none. Invalid
// UTF-8 bytes count as non-space characters of one byte.
size_t space_len_at(std::string_view s, size_t i) {
  const size_t n = tok::utf8_valid_len(s, i);
  if (n == 0) return 0;
  size_t j = i;
  return is_py_space(tok::utf8_next(s, j)) ? n : 0;
}

size_t char_len_at(std::string_view s, size_t i) { return std::max<size_t>(tok::utf8_valid_len(s, i), 1); }

// str.split(): maximal runs of non-whitespace characters.
std::vector<std::string_view> split_ws(std::string_view s) {
  std::vector<std::string_view> out;
  size_t i = 0, start = std::string_view::npos;
  while (i < s.size()) {
    const size_t sp = space_len_at(s, i);
    if (sp > 0) {
      if (start != std::string_view::npos) out.push_back(s.substr(start, i - start));
      start = std::string_view::npos;
      i += sp;
    } else {
      if (start == std::string_view::npos) start = i;
      i += char_len_at(s, i);
    }
  }
  if (start != std::string_view::npos) out.push_back(s.substr(start));
  return out;
}

// str.strip().
std::string_view strip_ws(std::string_view s) {
  size_t begin = 0, end = 0, i = 0;
  bool seen = false;
  while (i < s.size()) {
    const size_t sp = space_len_at(s, i);
    if (sp > 0) {
      i += sp;
      continue;
    }
    if (!seen) begin = i;
    seen = true;
    i += char_len_at(s, i);
    end = i;
  }
  return seen ? s.substr(begin, end - begin) : std::string_view();
}

// "<0xNN>" -> NN; -1 for any other piece.
int byte_token_value(std::string_view piece) {
  if (piece.size() != 6 || piece.substr(0, 3) != "<0x" || piece[5] != '>') return -1;
  auto hex = [](char c) {
    if (c >= '0' && c <= '9') return c - '0';
    if (c >= 'a' && c <= 'f') return c - 'a' + 10;
    if (c >= 'A' && c <= 'F') return c - 'A' + 10;
    return -1;
  };
  const int hi = hex(piece[3]), lo = hex(piece[4]);
  return hi < 0 || lo < 0 ? -1 : hi * 16 + lo;
}

pcre2_code* compile_pattern(const std::string& pattern, std::string* error) {
  int code = 0;
  PCRE2_SIZE offset = 0;
  pcre2_code* re = pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern.data()), pattern.size(), PCRE2_UTF | PCRE2_UCP,
                                 &code, &offset, nullptr);
  if (!re && error) {
    PCRE2_UCHAR buf[256];
    pcre2_get_error_message(code, buf, sizeof(buf));
    *error = "bad regex /" + pattern + "/ at offset " + std::to_string(offset) + ": " +
             reinterpret_cast<const char*>(buf);
  }
  return re;
}

bool regex_search(const std::string& pattern, const std::string& text) {
  pcre2_code* re = compile_pattern(pattern, nullptr);
  if (!re) return false;
  pcre2_match_data* md = pcre2_match_data_create_from_pattern(re, nullptr);
  // A negative result is no match, or invalid UTF-8 / a match limit: failure either way.
  const int rc = md ? pcre2_match(re, reinterpret_cast<PCRE2_SPTR>(text.data()), text.size(), 0, 0, md, nullptr) : -1;
  pcre2_match_data_free(md);
  pcre2_code_free(re);
  return rc >= 0;
}

bool item_right(const ItemResult& r) { return r.keyword >= 0 ? r.keyword == 1 : r.exact_match == 1; }

}  // namespace

std::string continuation_text(const Tokenizer& tokenizer, const std::vector<int32_t>& ids) {
  const std::optional<int32_t> bos = tokenizer.bos_id(), eos = tokenizer.eos_id();
  // SentencePiece vocabularies carry <0x00>..<0xFF>; byte-level ones map bytes to printable chars (Ġ = space).
  const bool byte_level = !tokenizer.token_to_id("<0x00>") && tokenizer.token_to_id("\xC4\xA0");
  std::string bytes;
  for (int32_t id : ids) {
    if (id == bos || id == eos) break;
    const std::string piece = tokenizer.id_to_token(id);
    if (byte_level) {
      for (size_t i = 0; i < piece.size();) {
        const size_t n = tok::utf8_valid_len(piece, i);
        if (n == 0) {
          bytes += piece[i++];
          continue;
        }
        const size_t start = i;
        const int b = tok::char_to_byte(tok::utf8_next(piece, i));
        if (b >= 0) {
          bytes += static_cast<char>(b);
        } else {
          bytes.append(piece, start, n);  // added tokens are stored as plain text
        }
      }
      continue;
    }
    if (const int b = byte_token_value(piece); b >= 0) {
      bytes += static_cast<char>(b);
      continue;
    }
    for (size_t i = 0; i < piece.size(); ++i) {
      if (piece.compare(i, 3, "\xE2\x96\x81") == 0) {  // U+2581
        bytes += ' ';
        i += 2;
      } else {
        bytes += piece[i];
      }
    }
  }
  return tok::utf8_lossy(bytes);
}

std::string cut_sentences(const std::string& text, int k) {
  if (k <= 0) return text;
  auto boundary = [&](size_t j) { return j == text.size() || space_len_at(text, j) > 0; };
  int found = 0;
  for (size_t i = 0; i < text.size(); ++i) {
    const char c = text[i];
    if (c != '.' && c != '!' && c != '?') continue;
    size_t end = i + 1;
    // The optional quote is greedy; without it the lookahead would see the quote, which is no space.
    if (end < text.size() && text[end] == '"') {
      ++end;
    } else if (text.compare(end, 3, "\xE2\x80\x9D") == 0) {  // U+201D
      end += 3;
    }
    if (!boundary(end)) continue;
    if (++found == k) return text.substr(0, end);
    i = end - 1;
  }
  return text;
}

int keyword_success(const KeywordRule& rule, const std::string& continuation) {
  switch (rule.type) {
    case KeywordRule::Type::kNone:
      return -1;
    case KeywordRule::Type::kIncludeExclude: {
      std::unordered_set<std::string_view> words;
      const std::string_view s = continuation;
      auto alpha = [](char c) { return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z'); };
      for (size_t i = 0; i < s.size();) {
        if (!alpha(s[i])) {
          ++i;
          continue;
        }
        size_t j = i;
        while (j < s.size() && alpha(s[j])) ++j;
        words.insert(s.substr(i, j - i));
        i = j;
      }
      const bool any = std::any_of(rule.include_any.begin(), rule.include_any.end(),
                                   [&](const std::string& w) { return words.count(w) > 0; });
      const bool banned = std::any_of(rule.exclude.begin(), rule.exclude.end(),
                                      [&](const std::string& w) { return words.count(w) > 0; });
      return any && !banned ? 1 : 0;
    }
    case KeywordRule::Type::kPrefix:
      return strip_ws(continuation).starts_with(rule.prefix) ? 1 : 0;
    case KeywordRule::Type::kRegex:
      return regex_search(rule.pattern, continuation) ? 1 : 0;
  }
  return -1;
}

Status check_keyword_pattern(const std::string& pattern) {
  std::string error;
  pcre2_code* re = compile_pattern(pattern, &error);
  if (!re) return Status::invalid_argument(error);
  pcre2_code_free(re);
  return Status::ok();
}

int exact_match(const std::string& compared, const std::string& reference) {
  return split_ws(compared) == split_ws(reference) ? 1 : 0;
}

double rouge_l_f1(const std::string& compared, const std::string& reference) {
  const std::vector<std::string_view> c = split_ws(compared), r = split_ws(reference);
  if (c.empty() || r.empty()) return 0;
  // LCS by dynamic programming over two rows.
  std::vector<int64_t> prev(r.size() + 1, 0), cur(r.size() + 1, 0);
  for (size_t i = 1; i <= c.size(); ++i) {
    for (size_t j = 1; j <= r.size(); ++j) {
      cur[j] = c[i - 1] == r[j - 1] ? prev[j - 1] + 1 : std::max(prev[j], cur[j - 1]);
    }
    std::swap(prev, cur);
  }
  const double lcs = static_cast<double>(prev[r.size()]);
  if (lcs == 0) return 0;
  const double p = lcs / static_cast<double>(c.size()), rec = lcs / static_cast<double>(r.size());
  return 2 * p * rec / (p + rec);  // evaluated as Python does: (2*p*rec) / (p+rec)
}

double token_f1(const std::string& compared, const std::string& reference) {
  const std::vector<std::string_view> c = split_ws(compared), r = split_ws(reference);
  if (c.empty() || r.empty()) return c.empty() && r.empty() ? 1 : 0;
  std::unordered_map<std::string_view, int64_t> left;
  for (std::string_view t : r) ++left[t];
  int64_t common = 0;
  for (std::string_view t : c) {
    auto it = left.find(t);
    if (it != left.end() && it->second > 0) {
      --it->second;
      ++common;
    }
  }
  if (common == 0) return 0;
  const double p = static_cast<double>(common) / static_cast<double>(c.size());
  const double rec = static_cast<double>(common) / static_cast<double>(r.size());
  return 2 * p * rec / (p + rec);
}

void score_item(const EvalItem& item, const Tokenizer& tokenizer, ItemResult* out) {
  out->id = item.id;
  out->continuation_text = continuation_text(tokenizer, out->generated_ids);
  out->compared_text = cut_sentences(out->continuation_text, item.reference_sentences);
  out->keyword = keyword_success(item.keyword, out->continuation_text);
  out->exact_match = exact_match(out->compared_text, item.reference);
  out->rougeL_f1 = rouge_l_f1(out->compared_text, item.reference);
  out->token_f1 = token_f1(out->compared_text, item.reference);
}

double percentile(std::vector<double> values, double p) {
  if (values.empty()) return 0;
  std::sort(values.begin(), values.end());
  p = std::clamp(p, 0.0, 100.0);
  const double rank = p / 100 * static_cast<double>(values.size() - 1);
  const size_t lo = static_cast<size_t>(std::floor(rank));
  const size_t hi = std::min(lo + 1, values.size() - 1);
  return values[lo] + (values[hi] - values[lo]) * (rank - static_cast<double>(lo));
}

ArmMetrics aggregate(const std::vector<ItemResult>& items, const std::vector<ItemResult>* online) {
  ArmMetrics m;
  m.n_items = static_cast<int64_t>(items.size());
  if (items.empty()) return m;
  const double n = static_cast<double>(items.size());

  double keyword_sum = 0, em_sum = 0, rouge_sum = 0, f1_sum = 0, nll_sum = 0;
  int64_t with_rule = 0;
  std::vector<double> ttft, tpot;
  for (const ItemResult& r : items) {
    if (r.keyword >= 0) {
      keyword_sum += r.keyword;
      ++with_rule;
    }
    em_sum += r.exact_match;
    rouge_sum += r.rougeL_f1;
    f1_sum += r.token_f1;
    nll_sum += r.nll_sum;
    m.n_ref_tokens += r.n_ref_tokens;
    ttft.push_back(r.ttft_ms);
    tpot.push_back(r.tpot_ms);
  }
  m.keyword_rate = with_rule > 0 ? keyword_sum / static_cast<double>(with_rule) : 0;
  m.exact_match_rate = em_sum / n;
  m.rougeL_f1 = rouge_sum / n;
  m.token_f1 = f1_sum / n;
  if (m.n_ref_tokens > 0) {
    m.nll_mean = nll_sum / static_cast<double>(m.n_ref_tokens);
    m.perplexity = std::exp(m.nll_mean);
  }

  // Agreement and flips pair items by id, so an arm missing an item cannot shift the rest.
  if (online != nullptr && online != &items) {
    std::unordered_map<std::string_view, const ItemResult*> by_id;
    for (const ItemResult& r : *online) by_id.emplace(r.id, &r);
    int64_t same = 0;
    for (const ItemResult& r : items) {
      auto it = by_id.find(r.id);
      if (it == by_id.end()) continue;
      if (it->second->generated_ids == r.generated_ids) ++same;
      if (item_right(*it->second) && !item_right(r)) ++m.negative_flips;
    }
    m.agreement = static_cast<double>(same) / n;
  }

  m.ttft_p50_ms = percentile(ttft, 50);
  m.ttft_p99_ms = percentile(std::move(ttft), 99);
  m.tpot_p50_ms = percentile(tpot, 50);
  m.tpot_p99_ms = percentile(std::move(tpot), 99);
  return m;
}

}  // namespace loragate::eval
