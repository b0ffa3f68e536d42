// Syntax tree of a parsed Jinja template.
#pragma once

#include <cstddef>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "chat/jinja_value.h"

namespace loragate::jinja {

struct Expr;
using ExprPtr = std::unique_ptr<Expr>;
using KwArgs = std::vector<std::pair<std::string, ExprPtr>>;

struct Expr {
  enum class Kind {
    kLiteral,  // literal
    kName,     // name
    kList,     // args (tuple: is_tuple)
    kDict,     // args: key, value, key, value...
    kGetAttr,  // args[0].name
    kGetItem,  // args[0][args[1]]
    kSlice,    // args[0][args[1]:args[2]:args[3]] (missing parts are null)
    kCall,     // args[0](args[1..], kwargs)
    kFilter,   // args[0] | name(args[1..], kwargs)
    kTest,     // args[0] is [not] name(args[1..])
    kUnary,    // op args[0]: "-", "+", "not"
    kBinary,   // args[0] op args[1]: + - * / // % ** ~ and or
    kCompare,  // args[0] ops[0] args[1] ops[1] args[2]...: == != < <= > >= in notin
    kCond,     // args[1] if args[0] else args[2] (args[2] may be null)
  };
  Kind kind;
  std::size_t pos = 0;
  Value literal;
  std::string name;  // name / attribute / filter / test / operator
  std::vector<ExprPtr> args;
  KwArgs kwargs;
  std::vector<std::string> ops;
  bool negated = false;
  bool is_tuple = false;
};

struct Stmt;
using StmtPtr = std::unique_ptr<Stmt>;
using Body = std::vector<StmtPtr>;

struct Stmt {
  enum class Kind {
    kText,         // text
    kOutput,       // {{ expr }}
    kIf,           // branches (cond, body); else_body
    kFor,          // for targets in expr [if cond]: body; else_body
    kSet,          // set targets (or targets[0].attr) = expr
    kSetBlock,     // set targets[0] %}body{% endset (optional filter in `filter`)
    kMacro,        // macro name(params) body
    kCallBlock,    // call[(params)] expr body
    kFilterBlock,  // filter filter_chain body
    kBreak,
    kContinue,
    kDo,           // do expr
    kScope,        // body rendered as is (generation, raw)
  };
  Kind kind;
  std::size_t pos = 0;
  std::string text;
  ExprPtr expr;
  ExprPtr cond;
  std::vector<std::pair<ExprPtr, Body>> branches;
  Body body;
  Body else_body;
  std::vector<std::string> targets;
  std::string attr;
  std::string name;
  std::vector<std::pair<std::string, ExprPtr>> params;  // macro parameters with optional defaults
  ExprPtr filter;  // kFilterBlock / kSetBlock: a kFilter chain whose innermost operand is null
};

struct Program {
  Body body;
};

}  // namespace loragate::jinja
