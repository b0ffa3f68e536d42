// The parser's expression rules, lowest precedence first: tuples, conditional
// expressions, or/and/not, comparisons, arithmetic, concatenation, unary
// operators, primaries, then postfix subscripts, calls, filters and tests.
#include <cstdlib>

#include "chat/jinja_parser_impl.h"

namespace loragate::jinja::parser_detail {

// A comma-separated sequence becomes a tuple; `for_iter` stops at 'if'.
ExprPtr Parser::parse_tuple(bool with_condexpr, bool for_iter) {
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

ExprPtr Parser::parse_expression(bool with_condexpr) { return with_condexpr ? parse_condexpr() : parse_or(); }

ExprPtr Parser::parse_condexpr() {
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

ExprPtr Parser::binary(const std::string& op, ExprPtr l, ExprPtr r, std::size_t pos) {
  auto b = make(Expr::Kind::kBinary, pos);
  b->name = op;
  b->args.push_back(std::move(l));
  b->args.push_back(std::move(r));
  return b;
}

ExprPtr Parser::parse_or() {
  ExprPtr l = parse_and();
  while (is_name("or")) {
    std::size_t pos = cur().pos;
    advance();
    l = binary("or", std::move(l), parse_and(), pos);
  }
  return l;
}

ExprPtr Parser::parse_and() {
  ExprPtr l = parse_not();
  while (is_name("and")) {
    std::size_t pos = cur().pos;
    advance();
    l = binary("and", std::move(l), parse_not(), pos);
  }
  return l;
}

ExprPtr Parser::parse_not() {
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

ExprPtr Parser::parse_compare() {
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

ExprPtr Parser::parse_math1() {
  ExprPtr l = parse_concat();
  while (is_op("+") || is_op("-")) {
    std::string op = cur().text;
    std::size_t pos = cur().pos;
    advance();
    l = binary(op, std::move(l), parse_concat(), pos);
  }
  return l;
}

ExprPtr Parser::parse_concat() {
  ExprPtr l = parse_math2();
  while (is_op("~")) {
    std::size_t pos = cur().pos;
    advance();
    l = binary("~", std::move(l), parse_math2(), pos);
  }
  return l;
}

ExprPtr Parser::parse_math2() {
  ExprPtr l = parse_pow();
  while (is_op("*") || is_op("/") || is_op("//") || is_op("%")) {
    std::string op = cur().text;
    std::size_t pos = cur().pos;
    advance();
    l = binary(op, std::move(l), parse_pow(), pos);
  }
  return l;
}

ExprPtr Parser::parse_pow() {
  ExprPtr l = parse_unary(true);
  while (is_op("**")) {
    std::size_t pos = cur().pos;
    advance();
    l = binary("**", std::move(l), parse_unary(true), pos);
  }
  return l;
}

ExprPtr Parser::parse_unary(bool with_filter) {
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

ExprPtr Parser::parse_primary() {
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

ExprPtr Parser::parse_postfix(ExprPtr node) {
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

ExprPtr Parser::parse_subscript(ExprPtr obj, std::size_t pos) {
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

void Parser::parse_call_args(Expr& e) {
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

ExprPtr Parser::parse_call(ExprPtr callee) {
  auto e = make(Expr::Kind::kCall, cur().pos);
  e->args.push_back(std::move(callee));
  parse_call_args(*e);
  return e;
}

ExprPtr Parser::parse_filter_expr(ExprPtr node) {
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
ExprPtr Parser::parse_filter_chain(ExprPtr operand, bool first_has_pipe) {
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

ExprPtr Parser::parse_test(ExprPtr node) {
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

}  // namespace loragate::jinja::parser_detail
