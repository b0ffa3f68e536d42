// Interpreter cases whose expected output was produced by Python Jinja2 3.1
// configured as transformers renders chat templates (trim_blocks, lstrip_blocks,
// loopcontrols, tojson = json.dumps(ensure_ascii=False)).
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "chat/chat_template.h"

namespace loragate {
namespace {

struct Case {
  const char* name;
  const char* tmpl;
  const char* vars;  // JSON object of template variables
  const char* want;
};

const Case kCases[] = {
    {"Loop vars",
     R"~~({% for x in items %}{{ loop.index0 }}{{ loop.index }}{{ loop.revindex }}{{ loop.revindex0 }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %})~~",
     R"~~({"items": ["a", "b", "c"]})~~",
     R"~~(0132TrueFalse3;1221FalseFalse3;2310FalseTrue3;)~~"},
    {"ForElseAndFilter",
     R"~~({% for x in items if x > 1 %}{{ x }}{{ ',' if not loop.last }}{% else %}none{% endfor %}|{% for x in [] %}x{% else %}empty{% endfor %})~~",
     R"~~({"items": [1, 2, 3]})~~",
     R"~~(2,3|empty)~~"},
    {"TupleUnpack",
     R"~~({% for k, v in d.items() %}{{ k }}={{ v }} {% endfor %}{% for a, b in [[1, 2], [3, 4]] %}{{ a + b }}{% endfor %})~~",
     R"~~({"d": {"b": 1, "a": 2}})~~",
     R"~~(b=1 a=2 37)~~"},
    {"Namespace",
     R"~~({% set ns = namespace(n=0, s='') %}{% for x in range(4) %}{% set ns.n = ns.n + x %}{% set ns.s = ns.s ~ x %}{% endfor %}{{ ns.n }} {{ ns.s }})~~",
     R"~~({})~~",
     R"~~(6 0123)~~"},
    {"LoopScope",
     R"~~({% set x = 1 %}{% for i in range(2) %}{% set x = x + 10 %}{{ x }} {% endfor %}{{ x }})~~",
     R"~~({})~~",
     R"~~(11 11 1)~~"},
    {"Slicing",
     R"~~({{ s[::-1] }} {{ s[1:] }} {{ s[:-1] }} {{ l[::-1] }} {{ l[1:3] }} {{ l[-2:] }} {{ l[::2] }} {{ s[-1] }})~~",
     R"~~({"s": "héllo", "l": [1, 2, 3, 4, 5]})~~",
     R"~~(olléh éllo héll [5, 4, 3, 2, 1] [2, 3] [4, 5] [1, 3, 5] o)~~"},
    {"ToJson",
     R"~~({{ d | tojson }}|{{ d | tojson(indent=2) }}|{{ 'é"\n' | tojson }}|{{ [1.5, none, true] | tojson }})~~",
     R"~~({"d": {"name": "get_weather", "parameters": {"type": "object", "required": ["city"], "n": 3}}})~~",
     R"~~({"name": "get_weather", "parameters": {"type": "object", "required": ["city"], "n": 3}}|{
  "name": "get_weather",
  "parameters": {
    "type": "object",
    "required": [
      "city"
    ],
    "n": 3
  }
}|"é\"\n"|[1.5, null, true])~~"},
    {"Filters",
     R"~~({{ '  hi  ' | trim }}|{{ 'abc' | upper }}|{{ 'ABC' | lower }}|{{ 'hello world' | title }}|{{ 'hELLO' | capitalize }}|{{ [1,2,3] | length }}|{{ 'héllo' | length }}|{{ [3,1,2] | join(', ') }}|{{ [1,2] | first }}{{ [1,2] | last }}|{{ [1,2,3] | reverse | list }}|{{ undefined_var | default('dflt') }}|{{ '' | default('x', true) }}|{{ 'a-b-c' | replace('-', '+') }}|{{ '42' | int + 1 }}|{{ 3 | string }})~~",
     R"~~({})~~",
     R"~~(hi|ABC|abc|Hello World|Hello|3|5|3, 1, 2|12|[3, 2, 1]|dflt|x|a+b+c|43|3)~~"},
    {"SelectMap",
     R"~~({{ msgs | selectattr('role', 'equalto', 'user') | map(attribute='content') | join(',') }}|{{ msgs | rejectattr('role', 'equalto', 'user') | list | length }}|{{ [1,2,3,4] | select('even') | list }})~~",
     R"~~({"msgs": [{"role": "user", "content": "a"}, {"role": "assistant", "content": "b"}, {"role": "user", "content": "c"}]})~~",
     R"~~(a,c|1|[2, 4])~~"},
    {"Indent",
     R"~~({{ text | indent(2) }}|{{ text | indent(2, true) }}|{{ text | indent(first=true, blank=true) }})~~",
     R"~~({"text": "a\n\nb\nc"})~~",
     R"~~(a

  b
  c|  a

  b
  c|    a
    
    b
    c)~~"},
    {"StringMethods",
     R"~~({{ s.startswith('He') }} {{ s.endswith(('x', 'd')) }} {{ s.split(' ') }} {{ s.split() }} {{ s.rsplit(' ', 1) }} {{ '--a--'.strip('-') }} {{ '\n\nx\n'.lstrip('\n') }}|{{ 'x  '.rstrip() }}|{{ s.find('lo') }} {{ s.replace('l', 'L', 2) }} {{ 'a{}b{}'.format(1, 2) }} {{ s.upper() }} {{ s.title() }})~~",
     R"~~({"s": "Hello world"})~~",
     R"~~(True True ['Hello', 'world'] ['Hello', 'world'] ['Hello', 'world'] a x
|x|3 HeLLo world a1b2 HELLO WORLD Hello World)~~"},
    {"Tests",
     R"~~({{ x is defined }} {{ y is defined }} {{ y is undefined }} {{ n is none }} {{ s is string }} {{ d is mapping }} {{ l is iterable }} {{ l is sequence }} {{ 1 is number }} {{ b is boolean }} {{ b is true }} {{ b is false }} {{ 3 is odd }} {{ 'a' is equalto 'a' }} {{ x is not none }} {{ 6 is divisibleby 3 }})~~",
     R"~~({"x": 1, "n": null, "s": "s", "d": {}, "l": [1], "b": true})~~",
     R"~~(True False True True True True True True True True True False True True True True)~~"},
    {"Arithmetic",
     R"~~({{ 7 // 2 }} {{ -7 // 2 }} {{ 7 % 3 }} {{ -7 % 3 }} {{ 7 / 2 }} {{ 2 ** 8 }} {{ 1 + 2 * 3 }} {{ (1 + 2) * 3 }} {{ 1.5 + 1 }} {{ 'a' ~ 1 ~ none }} {{ 'ab' * 2 }} {{ [1] + [2] }} {{ 10 - 3 - 2 }} {{ 0.1 + 0.2 }} {{ 1e20 }})~~",
     R"~~({})~~",
     R"~~(3 -4 1 2 3.5 256 7 9 2.5 a1None abab [1, 2] 5 0.30000000000000004 1e+20)~~"},
    {"Logic",
     R"~~({{ 1 < 2 < 3 }} {{ 'a' in 'cat' }} {{ 'z' not in ['a'] }} {{ 'k' in {'k': 1} }} {{ not true or false }} {{ none or 'x' }} {{ 0 and 1 }} {{ 'yes' if 1 > 2 else 'no' }} {{ [] == [] }} {{ 1 == 1.0 }} {{ 'a' != 'b' }})~~",
     R"~~({})~~",
     R"~~(True True True True False x 0 no True True True)~~"},
    {"Printing",
     R"~~({{ true }} {{ none }} {{ [1, 'a', none, true, 1.5] }} {{ {'a': 1, 'b': [2]} }} {{ ('x', 1) }} {{ 1.0 }} {{ 10 / 4 }} {{ "it's" }})~~",
     R"~~({})~~",
     R"~~(True None [1, 'a', None, True, 1.5] {'a': 1, 'b': [2]} ('x', 1) 1.0 2.5 it's)~~"},
    {"Whitespace",
     R"~~(A
  {% if true %}
    B
  {% endif %}
C {{- ' D ' -}} E
{#- comment -#}
F {# c #}
G
)~~",
     R"~~({})~~",
     R"~~(A
    B
C D EF G)~~"},
    {"Macro",
     R"~~({% macro greet(name, punct='!') %}Hi {{ name }}{{ punct }}{% endmacro %}{{ greet('Ann') }} {{ greet('Bob', punct='?') }}{% macro wrap() %}[{{ caller() }}]{% endmacro %}{% call wrap() %}inner{% endcall %})~~",
     R"~~({})~~",
     R"~~(Hi Ann! Hi Bob?[inner])~~"},
    {"SetBlockAndFilterBlock",
     R"~~({% set x %}  Hello {{ name }}  {% endset %}[{{ x }}]{% filter upper %}shout {{ name }}{% endfilter %})~~",
     R"~~({"name": "Ann"})~~",
     R"~~([  Hello Ann  ]SHOUT ANN)~~"},
    {"BreakContinue",
     R"~~({% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %})~~",
     R"~~({})~~",
     R"~~(0134)~~"},
    {"DictAccess",
     R"~~({{ d.a }} {{ d['b'] }} {{ d.get('c', 'none') }} {{ d.get('a') }} {{ d.missing }}|{{ d.keys() | list }} {{ d.values() | list }} {{ d | length }} {{ d.items() | list }})~~",
     R"~~({"d": {"a": 1, "b": "two"}})~~",
     R"~~(1 two none 1 |['a', 'b'] [1, 'two'] 2 [('a', 1), ('b', 'two')])~~"},
    {"Strings",
     R"~~({{ 'a\tb' }}|{{ "q\"q" }}|{{ 'x' 'y' }}|{{ '\u00e9' }})~~",
     R"~~({})~~",
     R"~~(a	b|q"q|xy|é)~~"},
};

TEST(JinjaInterpreter, MatchesPythonJinja) {
  for (const Case& c : kCases) {
    SCOPED_TRACE(c.name);
    Result<ChatTemplate> t = ChatTemplate::from_source(c.tmpl, {});
    ASSERT_TRUE(t.is_ok()) << t.status().to_string();
    nlohmann::ordered_json vars = nlohmann::ordered_json::parse(c.vars);
    Result<std::string> got = t->render(nlohmann::ordered_json::array(), false, vars);
    ASSERT_TRUE(got.is_ok()) << got.status().to_string();
    EXPECT_EQ(*got, c.want);
  }
}

}  // namespace
}  // namespace loragate
