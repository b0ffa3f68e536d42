// The parser's statement rules: bodies, tags ({% if %}, {% for %}, {% set %},
// macros, ...), for-loop targets and macro parameters.
#include <cstdlib>

#include "chat/jinja_parser_impl.h"

namespace loragate::jinja::parser_detail {

// Parses until a `{% name %}` with name in `ends` (left unconsumed) or EOF.
Body Parser::parse_body(std::initializer_list<const char*> ends, std::size_t opened_at) {
  DepthGuard guard(*this);
  Body body;
  std::size_t start = opened_at;
  while (true) {
    const Token& t = cur();
    if (t.type == TokenType::kEof) {
      if (ends.size() == 0) return body;
      std::string want;
      for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
      fail(std::string("unexpected end of template, expected ") + want + " (block opened here)", start);
    }
    if (t.type == TokenType::kText) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kText;
      s->pos = t.pos;
      s->text = t.text;
      body.push_back(std::move(s));
      advance();
    } else if (t.type == TokenType::kVarBegin) {
      auto s = std::make_unique<Stmt>();
      s->kind = Stmt::Kind::kOutput;
      s->pos = t.pos;
      advance();
      s->expr = parse_tuple(true);
      if (cur().type != TokenType::kVarEnd) fail_here("expected '}}', got " + describe(cur()));
      advance();
      body.push_back(std::move(s));
    } else if (t.type == TokenType::kBlockBegin) {
      const Token& n = peek();
      if (n.type != TokenType::kName) fail(n.type == TokenType::kBlockEnd ? "empty block tag" : "expected a tag name", n.pos);
      for (const char* e : ends)
        if (n.text == e) return body;
      if (n.text.rfind("end", 0) == 0 || n.text == "elif" || n.text == "else") {
        std::string want;
        for (const char* e : ends) want += std::string(want.empty() ? "" : " or ") + "'" + e + "'";
        fail("unexpected '" + n.text + "'" + (want.empty() ? std::string(" (no block is open)") : ", expected " + want), n.pos);
      }
      advance();
      body.push_back(parse_statement(t.pos));
    } else {
      fail_here("unexpected " + describe(t));
    }
  }
}

// Consumes `{% name %}` (the end tag of a block).
void Parser::end_tag(const char* name) {
  advance();  // BlockBegin
  if (!skip_name(name)) fail_here(std::string("expected '") + name + "'");
  expect_block_end();
}

StmtPtr Parser::make_stmt(Stmt::Kind k, std::size_t pos) {
  auto s = std::make_unique<Stmt>();
  s->kind = k;
  s->pos = pos;
  return s;
}

StmtPtr Parser::parse_statement(std::size_t pos) {
  std::string tag = cur().text;
  std::size_t tag_pos = cur().pos;
  advance();
  if (tag == "if") {
    auto s = make_stmt(Stmt::Kind::kIf, pos);
    ExprPtr cond = parse_tuple(false);
    expect_block_end();
    while (true) {
      Body b = parse_body({"elif", "else", "endif"}, pos);
      s->branches.emplace_back(std::move(cond), std::move(b));
      advance();  // BlockBegin
      std::string which = cur().text;
      advance();
      if (which == "elif") {
        cond = parse_tuple(false);
        expect_block_end();
        continue;
      }
      expect_block_end();
      if (which == "else") {
        s->else_body = parse_body({"endif"}, pos);
        end_tag("endif");
      }
      return s;
    }
  }
  if (tag == "for") {
    auto s = make_stmt(Stmt::Kind::kFor, pos);
    s->targets = parse_targets();
    if (!skip_name("in")) fail_here("expected 'in', got " + describe(cur()));
    s->expr = parse_tuple(false, true);
    if (skip_name("if")) s->cond = parse_expression(true);
    if (is_name("recursive")) fail_here("recursive for loops are not supported");
    expect_block_end();
    ++loop_depth_;
    s->body = parse_body({"endfor", "else"}, pos);
    --loop_depth_;
    advance();
    std::string which = cur().text;
    advance();
    expect_block_end();
    if (which == "else") {
      s->else_body = parse_body({"endfor"}, pos);
      end_tag("endfor");
    }
    return s;
  }
  if (tag == "set") {
    std::size_t target_pos = cur().pos;
    std::vector<std::string> targets = parse_targets();
    std::string attr;
    if (targets.size() == 1 && skip_op(".")) attr = expect_name();
    if (skip_op("=")) {
      auto s = make_stmt(Stmt::Kind::kSet, pos);
      s->targets = std::move(targets);
      s->attr = std::move(attr);
      s->expr = parse_tuple(true);
      expect_block_end();
      return s;
    }
    if (targets.size() != 1 || !attr.empty()) fail("a block set needs a single name", target_pos);
    auto s = make_stmt(Stmt::Kind::kSetBlock, pos);
    s->targets = std::move(targets);
    if (is_op("|")) s->filter = parse_filter_chain(nullptr);
    expect_block_end();
    s->body = parse_body({"endset"}, pos);
    end_tag("endset");
    return s;
  }
  if (tag == "macro") {
    auto s = make_stmt(Stmt::Kind::kMacro, pos);
    s->name = expect_name();
    parse_params(s->params);
    expect_block_end();
    int saved = loop_depth_;
    loop_depth_ = 0;
    s->body = parse_body({"endmacro"}, pos);
    loop_depth_ = saved;
    end_tag("endmacro");
    return s;
  }
  if (tag == "call") {
    auto s = make_stmt(Stmt::Kind::kCallBlock, pos);
    if (is_op("(")) parse_params(s->params);
    s->expr = parse_expression(true);
    if (s->expr->kind != Expr::Kind::kCall) fail(std::string("expected a call after 'call'"), tag_pos);
    expect_block_end();
    s->body = parse_body({"endcall"}, pos);
    end_tag("endcall");
    return s;
  }
  if (tag == "filter") {
    auto s = make_stmt(Stmt::Kind::kFilterBlock, pos);
    s->filter = parse_filter_chain(nullptr, /*first_has_pipe=*/false);
    expect_block_end();
    s->body = parse_body({"endfilter"}, pos);
    end_tag("endfilter");
    return s;
  }
  if (tag == "break" || tag == "continue") {
    if (loop_depth_ == 0) fail("'" + tag + "' outside of a loop", tag_pos);
    expect_block_end();
    return make_stmt(tag == "break" ? Stmt::Kind::kBreak : Stmt::Kind::kContinue, pos);
  }
  if (tag == "do") {
    auto s = make_stmt(Stmt::Kind::kDo, pos);
    s->expr = parse_tuple(true);
    expect_block_end();
    return s;
  }
  if (tag == "generation" || tag == "raw") {
    auto s = make_stmt(Stmt::Kind::kScope, pos);
    expect_block_end();
    const char* end = tag == "raw" ? "endraw" : "endgeneration";
    s->body = parse_body({end}, pos);
    end_tag(end);
    return s;
  }
  if (tag == "extends" || tag == "include" || tag == "import" || tag == "from" || tag == "block")
    fail("the '" + tag + "' tag is not supported in chat templates", tag_pos);
  fail("unknown or misplaced tag '" + tag + "'", tag_pos);
}

std::vector<std::string> Parser::parse_targets() {
  bool paren = skip_op("(");
  std::vector<std::string> names{expect_name()};
  while (skip_op(",")) {
    if (cur().type != TokenType::kName) break;
    names.push_back(expect_name());
  }
  if (paren) expect_op(")");
  return names;
}

void Parser::parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
  expect_op("(");
  while (!is_op(")")) {
    std::string n = expect_name();
    ExprPtr def;
    if (skip_op("=")) def = parse_expression(true);
    params.emplace_back(std::move(n), std::move(def));
    if (!skip_op(",")) break;
  }
  expect_op(")");
}

}  // namespace loragate::jinja::parser_detail
