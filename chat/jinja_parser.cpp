#include "chat/jinja_parser.h"

#include <cstdlib>
#include <initializer_list>

#include "chat/jinja_lexer.h"

namespace loragate::jinja {
namespace {

constexpr int kMaxNesting = 200;

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

  // --- statements -----------------------------------------------------------
  // Parses until a `{% name %}` with name in `ends` (left unconsumed) or EOF.
  Body parse_body(std::initializer_list<const char*> ends, std::size_t opened_at = 0) {
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
  void end_tag(const char* name) {
    advance();  // BlockBegin
    if (!skip_name(name)) fail_here(std::string("expected '") + name + "'");
    expect_block_end();
  }
  StmtPtr make_stmt(Stmt::Kind k, std::size_t pos) {
    auto s = std::make_unique<Stmt>();
    s->kind = k;
    s->pos = pos;
    return s;
  }

  StmtPtr parse_statement(std::size_t pos) {
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

  std::vector<std::string> parse_targets() {
    bool paren = skip_op("(");
    std::vector<std::string> names{expect_name()};
    while (skip_op(",")) {
      if (cur().type != TokenType::kName) break;
      names.push_back(expect_name());
    }
    if (paren) expect_op(")");
    return names;
  }

  void parse_params(std::vector<std::pair<std::string, ExprPtr>>& params) {
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

  // --- expressions ----------------------------------------------------------
  // A comma-separated sequence becomes a tuple; `for_iter` stops at 'if'.
  ExprPtr parse_tuple(bool with_condexpr, bool for_iter = false) {
    std::size_t pos = cur().pos;
    ExprPtr first = parse_expression(with_condexpr);
    if (!is_op(",")) return first;
    auto t = make(Expr::Kind::kList, pos);
    t->is_tuple = true;
    t->args.push_back(std::move(first));
    while (skip_op(",")) {
      if (cur().type == TokenType::kBlockEnd || cur().type == TokenType::kVarEnd || is_op(")") ||
          (for_iter && is_name("if")))
        break;
      t->args.push_back(parse_expression(with_condexpr));
    }
    return t;
  }

  ExprPtr parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

  ExprPtr parse_condexpr() {
    DepthGuard guard(*this);
    ExprPtr e = parse_or();
    while (is_name("if")) {
      std::size_t pos = cur().pos;
      advance();
      auto c = make(Expr::Kind::kCond, pos);
      c->args.push_back(parse_or());
      c->args.push_back(std::move(e));
      c->args.push_back(skip_name("else") ? parse_condexpr() : nullptr);
      e = std::move(c);
    }
    return e;
  }

  ExprPtr binary(const std::string& op, ExprPtr l, ExprPtr r, std::size_t pos) {
    auto b = make(Expr::Kind::kBinary, pos);
    b->name = op;
    b->args.push_back(std::move(l));
    b->args.push_back(std::move(r));
    return b;
  }

  ExprPtr parse_or() {
    ExprPtr l = parse_and();
    while (is_name("or")) {
      std::size_t pos = cur().pos;
      advance();
      l = binary("or", std::move(l), parse_and(), pos);
    }
    return l;
  }
  ExprPtr parse_and() {
    ExprPtr l = parse_not();
    while (is_name("and")) {
      std::size_t pos = cur().pos;
      advance();
      l = binary("and", std::move(l), parse_not(), pos);
    }
    return l;
  }
  ExprPtr parse_not() {
    DepthGuard guard(*this);
    if (is_name("not")) {
      auto u = make(Expr::Kind::kUnary, cur().pos);
      advance();
      u->name = "not";
      u->args.push_back(parse_not());
      return u;
    }
    return parse_compare();
  }
  ExprPtr parse_compare() {
    std::size_t pos = cur().pos;
    ExprPtr first = parse_math1();
    ExprPtr cmp;
    while (true) {
      std::string op;
      if (cur().type == TokenType::kOp &&
          (cur().text == "==" || cur().text == "!=" || cur().text == "<" || cur().text == "<=" || cur().text == ">" ||
           cur().text == ">=")) {
        op = cur().text;
        advance();
      } else if (is_name("in")) {
        op = "in";
        advance();
      } else if (is_name("not") && peek().type == TokenType::kName && peek().text == "in") {
        op = "notin";
        advance();
        advance();
      } else {
        break;
      }
      if (!cmp) {
        cmp = make(Expr::Kind::kCompare, pos);
        cmp->args.push_back(std::move(first));
      }
      cmp->ops.push_back(op);
      cmp->args.push_back(parse_math1());
    }
    return cmp ? std::move(cmp) : std::move(first);
  }
  ExprPtr parse_math1() {
    ExprPtr l = parse_concat();
    while (is_op("+") || is_op("-")) {
      std::string op = cur().text;
      std::size_t pos = cur().pos;
      advance();
      l = binary(op, std::move(l), parse_concat(), pos);
    }
    return l;
  }
  ExprPtr parse_concat() {
    ExprPtr l = parse_math2();
    while (is_op("~")) {
      std::size_t pos = cur().pos;
      advance();
      l = binary("~", std::move(l), parse_math2(), pos);
    }
    return l;
  }
  ExprPtr parse_math2() {
    ExprPtr l = parse_pow();
    while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
      std::string op = cur().text;
      std::size_t pos = cur().pos;
      advance();
      l = binary(op, std::move(l), parse_pow(), pos);
    }
    return l;
  }
  ExprPtr parse_pow() {
    ExprPtr l = parse_unary(true);
    while (is_op("**")) {
      std::size_t pos = cur().pos;
      advance();
      l = binary("**", std::move(l), parse_unary(true), pos);
    }
    return l;
  }
  ExprPtr parse_unary(bool with_filter) {
    DepthGuard guard(*this);
    ExprPtr node;
    if (is_op("-") || is_op("+")) {
      node = make(Expr::Kind::kUnary, cur().pos);
      node->name = cur().text;
      advance();
      node->args.push_back(parse_unary(false));
    } else {
      node = parse_primary();
    }
    node = parse_postfix(std::move(node));
    if (with_filter) node = parse_filter_expr(std::move(node));
    return node;
  }

  ExprPtr parse_primary() {
    const Token& t = cur();
    std::size_t pos = t.pos;
    if (t.type == TokenType::kName) {
      auto e = make(Expr::Kind::kLiteral, pos);
      if (t.text == "true" || t.text == "True") e->literal = Value::boolean(true);
      else if (t.text == "false" || t.text == "False") e->literal = Value::boolean(false);
      else if (t.text == "none" || t.text == "None") e->literal = Value::none();
      else {
        e->kind = Expr::Kind::kName;
        e->name = t.text;
      }
      advance();
      return e;
    }
    if (t.type == TokenType::kString) {
      std::string s;
      while (cur().type == TokenType::kString) {  // adjacent literals concatenate
        s += cur().text;
        advance();
      }
      auto e = make(Expr::Kind::kLiteral, pos);
      e->literal = Value::string(std::move(s));
      return e;
    }
    if (t.type == TokenType::kInt || t.type == TokenType::kFloat) {
      auto e = make(Expr::Kind::kLiteral, pos);
      if (t.type == TokenType::kInt) {
        char* end = nullptr;
        long long v = std::strtoll(t.text.c_str(), &end, 10);
        e->literal = Value::integer(v);
      } else {
        e->literal = Value::real(std::strtod(t.text.c_str(), nullptr));
      }
      advance();
      return e;
    }
    if (skip_op("(")) {
      if (skip_op(")")) {
        auto e = make(Expr::Kind::kList, pos);
        e->is_tuple = true;
        return e;
      }
      ExprPtr e = parse_tuple(true);
      expect_op(")");
      return e;
    }
    if (skip_op("[")) {
      auto e = make(Expr::Kind::kList, pos);
      while (!is_op("]")) {
        e->args.push_back(parse_expression(true));
        if (!skip_op(",")) break;
      }
      expect_op("]");
      return e;
    }
    if (skip_op("{")) {
      auto e = make(Expr::Kind::kDict, pos);
      while (!is_op("}")) {
        e->args.push_back(parse_expression(true));
        expect_op(":");
        e->args.push_back(parse_expression(true));
        if (!skip_op(",")) break;
      }
      expect_op("}");
      return e;
    }
    fail_here("unexpected " + describe(t));
  }

  ExprPtr parse_postfix(ExprPtr node) {
    while (true) {
      std::size_t pos = cur().pos;
      if (skip_op(".")) {
        if (cur().type == TokenType::kName) {
          auto e = make(Expr::Kind::kGetAttr, pos);
          e->name = cur().text;
          e->args.push_back(std::move(node));
          advance();
          node = std::move(e);
        } else if (cur().type == TokenType::kInt) {
          auto e = make(Expr::Kind::kGetItem, pos);
          e->args.push_back(std::move(node));
          auto idx = make(Expr::Kind::kLiteral, cur().pos);
          idx->literal = Value::integer(std::strtoll(cur().text.c_str(), nullptr, 10));
          e->args.push_back(std::move(idx));
          advance();
          node = std::move(e);
        } else {
          fail_here("expected an attribute name after '.'");
        }
      } else if (skip_op("[")) {
        node = parse_subscript(std::move(node), pos);
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  ExprPtr parse_subscript(ExprPtr obj, std::size_t pos) {
    ExprPtr parts[3];
    bool is_slice = false;
    if (!is_op(":")) parts[0] = parse_expression(true);
    if (skip_op(":")) {
      is_slice = true;
      if (!is_op(":") && !is_op("]")) parts[1] = parse_expression(true);
      if (skip_op(":") && !is_op("]")) parts[2] = parse_expression(true);
    }
    expect_op("]");
    auto e = make(is_slice ? Expr::Kind::kSlice : Expr::Kind::kGetItem, pos);
    e->args.push_back(std::move(obj));
    if (is_slice) {
      for (auto& p : parts) e->args.push_back(std::move(p));
    } else {
      e->args.push_back(std::move(parts[0]));
    }
    return e;
  }

  void parse_call_args(Expr& e) {
    expect_op("(");
    while (!is_op(")")) {
      if (is_op("*") || is_op("**")) fail_here("*args and **kwargs in calls are not supported");
      if (cur().type == TokenType::kName && peek().type == TokenType::kOp && peek().text == "=") {
        std::string key = cur().text;
        advance();
        advance();
        e.kwargs.emplace_back(std::move(key), parse_expression(true));
      } else {
        if (!e.kwargs.empty()) fail_here("positional argument after keyword argument");
        e.args.push_back(parse_expression(true));
      }
      if (!skip_op(",")) break;
    }
    expect_op(")");
  }

  ExprPtr parse_call(ExprPtr callee) {
    auto e = make(Expr::Kind::kCall, cur().pos);
    e->args.push_back(std::move(callee));
    parse_call_args(*e);
    return e;
  }

  ExprPtr parse_filter_expr(ExprPtr node) {
    while (true) {
      if (is_op("|")) {
        node = parse_filter_chain(std::move(node));
      } else if (is_name("is")) {
        node = parse_test(std::move(node));
      } else if (is_op("(")) {
        node = parse_call(std::move(node));
      } else {
        return node;
      }
    }
  }

  // `| f(args) | g ...` applied to `operand` (null for filter blocks).
  ExprPtr parse_filter_chain(ExprPtr operand, bool first_has_pipe = true) {
    bool first = true;
    while ((first && !first_has_pipe) || is_op("|")) {
      if (!(first && !first_has_pipe)) advance();
      first = false;
      auto f = make(Expr::Kind::kFilter, cur().pos);
      f->name = expect_name();
      while (skip_op(".")) {
        f->name += '.';
        f->name.append(expect_name());
      }
      f->args.push_back(std::move(operand));
      if (is_op("(")) parse_call_args(*f);
      operand = parse_postfix(std::move(f));
    }
    return operand;
  }

  ExprPtr parse_test(ExprPtr node) {
    auto t = make(Expr::Kind::kTest, cur().pos);
    advance();  // 'is'
    if (skip_name("not")) t->negated = true;
    t->name = expect_name();
    t->args.push_back(std::move(node));
    if (is_op("(")) {
      parse_call_args(*t);
    } else if ((cur().type == TokenType::kName || cur().type == TokenType::kString || cur().type == TokenType::kInt ||
                cur().type == TokenType::kFloat || is_op("[") || is_op("{")) &&
               !is_name("else") && !is_name("or") && !is_name("and") && !is_name("if")) {
      if (is_name("is")) fail_here("tests cannot be chained with 'is'");
      t->args.push_back(parse_postfix(parse_primary()));
    }
    return t;
  }

  const std::string& src_;
  std::vector<Token> toks_;
  std::size_t i_ = 0;
  int depth_ = 0;
  int loop_depth_ = 0;
};

}  // namespace

Program parse_template(const std::string& source) { return Parser(source, tokenize(source)).run(); }

}  // namespace loragate::jinja
