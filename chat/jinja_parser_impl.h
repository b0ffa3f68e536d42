// The recursive-descent parser of the Jinja subset, shared by the files that
// hold its statement rules (jinja_parse_statements.cpp) and its expression
// rules (jinja_parse_expressions.cpp). Internal to chat/; parse_template()
// (jinja_parser.h) is the entry point.
#pragma once

#include <algorithm>
#include <cstddef>
#include <initializer_list>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_ast.h"
#include "chat/jinja_lexer.h"

namespace loragate::jinja::parser_detail {

inline constexpr int kMaxNesting = 200;

class Parser {
 public:
  Parser(const std::string& src, std::vector<Token> tokens) : src_(src), toks_(std::move(tokens)) {}

  Program run() {
    Program p;
    p.body = parse_body({});
    return p;
  }

 private:
  // --- token helpers --------------------------------------------------------
  const Token& cur() const { return toks_[i_]; }
  const Token& peek(std::size_t n = 1) const { return toks_[std::min(i_ + n, toks_.size() - 1)]; }
  void advance() {
    if (i_ + 1 < toks_.size()) ++i_;
  }
  bool is_op(const char* op) const { return cur().type == TokenType::kOp && cur().text == op; }
  bool is_name(const char* n) const { return cur().type == TokenType::kName && cur().text == n; }
  bool skip_op(const char* op) {
    if (!is_op(op)) return false;
    advance();
    return true;
  }
  bool skip_name(const char* n) {
    if (!is_name(n)) return false;
    advance();
    return true;
  }
  [[noreturn]] void fail(const std::string& msg, std::size_t pos) const {
    throw TemplateError(StatusCode::kCorrupt, "template syntax error at " + describe_position(src_, pos) + ": " + msg);
  }
  [[noreturn]] void fail_here(const std::string& msg) const { fail(msg, cur().pos); }
  std::string describe(const Token& t) const {
    switch (t.type) {
      case TokenType::kEof: return "end of template";
      case TokenType::kBlockEnd: return "'%}'";
      case TokenType::kVarEnd: return "'}}'";
      case TokenType::kText: return "text";
      case TokenType::kString: return "string literal";
      default: return "'" + t.text + "'";
    }
  }
  void expect_op(const char* op) {
    if (!skip_op(op)) fail_here(std::string("expected '") + op + "', got " + describe(cur()));
  }
  std::string expect_name() {
    if (cur().type != TokenType::kName) fail_here("expected a name, got " + describe(cur()));
    std::string n = cur().text;
    advance();
    return n;
  }
  void expect_block_end() {
    if (cur().type != TokenType::kBlockEnd) fail_here("expected '%}', got " + describe(cur()));
    advance();
  }
  ExprPtr make(Expr::Kind k, std::size_t pos) {
    auto e = std::make_unique<Expr>();
    e->kind = k;
    e->pos = pos;
    return e;
  }
  struct DepthGuard {
    Parser& p;
    explicit DepthGuard(Parser& parser) : p(parser) {
      if (++p.depth_ > kMaxNesting) p.fail_here("template nested too deeply");
    }
    ~DepthGuard() { --p.depth_; }
  };

  // --- statements (jinja_parse_statements.cpp) --------------------------------
  // Parses until a `{% name %}` with name in `ends` (left unconsumed) or EOF.
  Body parse_body(std::initializer_list<const char*> ends, std::size_t opened_at = 0);
  // Consumes `{% name %}` (the end tag of a block).
  void end_tag(const char* name);
  StmtPtr make_stmt(Stmt::Kind k, std::size_t pos);
  StmtPtr parse_statement(std::size_t pos);
  std::vector<std::string> parse_targets();
  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params);

  // --- expressions (jinja_parse_expressions.cpp) ------------------------------
  // A comma-separated sequence becomes a tuple; `for_iter` stops at 'if'.
  ExprPtr parse_tuple(bool with_condexpr, bool for_iter = false);
  ExprPtr parse_expression(bool with_condexpr);
  ExprPtr parse_condexpr();
  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, std::size_t pos);
  ExprPtr parse_or();
  ExprPtr parse_and();
  ExprPtr parse_not();
  ExprPtr parse_compare();
  ExprPtr parse_math1();
  ExprPtr parse_concat();
  ExprPtr parse_math2();
  ExprPtr parse_pow();
  ExprPtr parse_unary(bool with_filter);
  ExprPtr parse_primary();
  ExprPtr parse_postfix(ExprPtr node);
  ExprPtr parse_subscript(ExprPtr obj, std::size_t pos);
  void parse_call_args(Expr& e);
  ExprPtr parse_call(ExprPtr callee);
  ExprPtr parse_filter_expr(ExprPtr node);
  // `| f(args) | g ...` applied to `operand` (null for filter blocks).
  ExprPtr parse_filter_chain(ExprPtr operand, bool first_has_pipe = true);
  ExprPtr parse_test(ExprPtr node);

  const std::string& src_;
  std::vector<Token> toks_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace loragate::jinja::parser_detail
