// What kind of value a JSON field holds, for error messages that must never
// quote the value itself (a file named by a client must not be readable
// through the errors it causes). Header-only: only rooms that parse JSON
// include it.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

namespace loragate {

inline std::string json_kind_name(const nlohmann::json& v) {
  using t = nlohmann::json::value_t;
  switch (v.type()) {
    case t::null: return "null";
    case t::boolean: return "a boolean";
    case t::string: return "a string";
    case t::number_integer:
    case t::number_unsigned: return "an integer";
    case t::number_float: return "a fractional number";
    case t::array: return "a list";
    case t::object: return "an object";
    default: return "another kind of value";
  }
}

}  // namespace loragate
