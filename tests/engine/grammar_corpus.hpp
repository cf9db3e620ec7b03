#pragma once
/// @file
/// The schema corpus of the grammar walk tests: 50+ schemas of the shapes
/// structured-output users send (nested objects, bounded arrays, enums,
/// anyOf, patterns, recursive $ref). oneOf alternatives are disjoint, so
/// "exactly one" and "at least one" agree.

#include <string>
#include <vector>

namespace tessera::test::grammar_support {

inline const std::vector<std::string>& schema_corpus() {
  static const std::vector<std::string> corpus = {
      R"({"type":"null"})",
      R"({"type":"boolean"})",
      R"({"type":"integer"})",
      R"({"type":"number"})",
      R"({"type":"string"})",
      R"({"type":"string","maxLength":5})",
      R"({"type":"string","minLength":3,"maxLength":8})",
      R"({"type":"string","minLength":4})",
      R"({"type":"string","pattern":"^[A-Z]{3}-\\d{4}$"})",
      R"({"type":"string","pattern":"^(red|green|blue)$"})",
      R"({"type":"string","pattern":"^[a-z0-9._]+@[a-z]+\\.(com|org)$"})",
      R"({"type":"string","pattern":"^\\d{4}-\\d{2}-\\d{2}$"})",
      R"({"type":"string","pattern":"ab+c"})",
      R"({"type":"string","pattern":"^[^\"\\\\]{2,6}$"})",
      R"({"type":"string","pattern":"^\\s*\\w+\\s*$","maxLength":10})",
      R"({"type":"string","pattern":"^(\\+|-)?[0-9]+(\\.[0-9]{1,2})?$"})",
      R"({"type":"string","pattern":"^.{2,4}$"})",
      R"({"type":"string","pattern":"^[\\u00e0-\\u00ff]+x?$","maxLength":6})",
      R"({"enum":["small","medium","large"]})",
      R"({"enum":[1,2,3,"many",null,true]})",
      R"({"const":{"version":2,"tags":["a","b"]}})",
      R"({"type":["integer","string"]})",
      R"({"type":["null","boolean","number"]})",
      R"({"type":"array"})",
      R"({"type":"array","items":{"type":"integer"}})",
      R"({"type":"array","items":{"type":"string","maxLength":3},"minItems":2,"maxItems":4})",
      R"({"type":"array","items":{"type":"boolean"},"maxItems":0})",
      R"({"type":"array","items":{"type":"array","items":{"type":"number"},"maxItems":2},"minItems":1,"maxItems":3})",
      R"({"type":"array","items":{"enum":["x","y"]},"minItems":3})",
      R"({"type":"object"})",
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name","age"],"additionalProperties":false})",
      R"({"type":"object","properties":{"name":{"type":"string"},"age":{"type":"integer"}},"required":["name"]})",
      R"({"type":"object","properties":{"a":{"type":"boolean"},"b":{"type":"boolean"},"c":{"type":"boolean"}},"additionalProperties":false})",
      R"({"type":"object","properties":{"id":{"type":"string","pattern":"^[0-9a-f]{8}$"},"score":{"type":"number"}},"required":["id"],"additionalProperties":false})",
      R"({"type":"object","additionalProperties":{"type":"integer"}})",
      R"({"type":"object","properties":{"k":{"const":"v"}},"required":["k"],"additionalProperties":{"type":"string","maxLength":2}})",
      R"({"type":"object","properties":{"user":{"type":"object","properties":{"first":{"type":"string"},"last":{"type":"string"},"address":{"type":"object","properties":{"city":{"type":"string"},"zip":{"type":"string","pattern":"^\\d{5}$"}},"required":["city","zip"],"additionalProperties":false}},"required":["first","address"],"additionalProperties":false}},"required":["user"],"additionalProperties":false})",
      R"({"type":"object","properties":{"items":{"type":"array","items":{"type":"object","properties":{"sku":{"type":"string"},"qty":{"type":"integer"}},"required":["sku","qty"],"additionalProperties":false},"minItems":1,"maxItems":3}},"required":["items"],"additionalProperties":false})",
      R"({"type":"object","properties":{"status":{"enum":["ok","error"]},"code":{"type":"integer"},"message":{"type":["string","null"]}},"required":["status","code","message"],"additionalProperties":false})",
      R"({"type":"object","properties":{"tags":{"type":"array","items":{"type":"string","minLength":1,"maxLength":10},"maxItems":5}},"additionalProperties":false})",
      R"({"anyOf":[{"type":"string","maxLength":2},{"type":"integer"},{"type":"null"}]})",
      R"({"anyOf":[{"type":"object","properties":{"kind":{"const":"circle"},"r":{"type":"number"}},"required":["kind","r"],"additionalProperties":false},{"type":"object","properties":{"kind":{"const":"rect"},"w":{"type":"number"},"h":{"type":"number"}},"required":["kind","w","h"],"additionalProperties":false}]})",
      R"({"oneOf":[{"type":"string","pattern":"^a+$"},{"type":"integer"},{"type":"array","items":{"type":"null"},"maxItems":2}]})",
      R"({"anyOf":[{"type":"string"},{"type":"string","maxLength":1}]})",
      R"({"type":"object","properties":{"value":{"anyOf":[{"type":"number"},{"type":"array","items":{"type":"number"},"maxItems":3}]}},"required":["value"],"additionalProperties":false})",
      R"({"$defs":{"tree":{"type":"object","properties":{"name":{"type":"string","maxLength":4},"children":{"type":"array","items":{"$ref":"#/$defs/tree"},"maxItems":2}},"required":["name","children"],"additionalProperties":false}},"$ref":"#/$defs/tree"})",
      R"({"$defs":{"list":{"anyOf":[{"type":"null"},{"type":"object","properties":{"head":{"type":"integer"},"tail":{"$ref":"#/$defs/list"}},"required":["head","tail"],"additionalProperties":false}]}},"$ref":"#/$defs/list"})",
      R"({"definitions":{"expr":{"anyOf":[{"type":"integer"},{"type":"object","properties":{"op":{"enum":["+","*"]},"args":{"type":"array","items":{"$ref":"#/definitions/expr"},"minItems":2,"maxItems":2}},"required":["op","args"],"additionalProperties":false}]}},"$ref":"#/definitions/expr"})",
      R"({"type":"object","properties":{"child":{"$ref":"#"},"v":{"type":"boolean"}},"required":["v"],"additionalProperties":false})",
      R"({"type":"array","items":{"$ref":"#"},"maxItems":3})",
      R"({"$defs":{"json":{"anyOf":[{"type":"null"},{"type":"boolean"},{"type":"number"},{"type":"string"},{"type":"array","items":{"$ref":"#/$defs/json"}},{"type":"object","additionalProperties":{"$ref":"#/$defs/json"}}]}},"$ref":"#/$defs/json"})",
      R"({"type":"object","properties":{"name":{"type":"string"},"arguments":{"type":"object","properties":{"location":{"type":"string"},"unit":{"enum":["celsius","fahrenheit"]}},"required":["location"],"additionalProperties":false}},"required":["name","arguments"],"additionalProperties":false})",
      R"({"type":"object","properties":{"date":{"type":"string","pattern":"^\\d{4}-(0[1-9]|1[0-2])-(0[1-9]|[12]\\d|3[01])$"},"amount":{"type":"number"},"currency":{"type":"string","pattern":"^[A-Z]{3}$"}},"required":["date","amount","currency"],"additionalProperties":false})",
      R"({"type":"object","properties":{"matrix":{"type":"array","items":{"type":"array","items":{"type":"integer"},"minItems":2,"maxItems":2},"minItems":2,"maxItems":2}},"required":["matrix"],"additionalProperties":false})",
      R"({"type":"object","properties":{"answer":{"type":"string","maxLength":20},"confidence":{"type":"number"},"sources":{"type":"array","items":{"type":"string","pattern":"^https?://[a-z.]+/?$"},"maxItems":2}},"required":["answer","confidence"],"additionalProperties":false})",
      R"({"type":"object","properties":{"flag":{"type":"boolean"},"nothing":{"type":"null"},"list":{"type":"array","items":true,"maxItems":2}},"required":["flag","nothing","list"]})",
      R"({"type":"object","properties":{"\"quoted\"":{"type":"integer"},"back\\slash":{"type":"string","maxLength":2},"ünï":{"type":"boolean"}},"required":["\"quoted\"","back\\slash","ünï"],"additionalProperties":false})",
      R"({"type":"object","properties":{"s":{"type":"string","pattern":"^[\"\\\\/\\n]{1,3}$"}},"required":["s"],"additionalProperties":false})",
      R"({"type":"object","properties":{"at":{"type":"string","format":"date-time"},"id":{"type":"string","format":"uuid"},"contact":{"type":"string","format":"email"},"ip":{"type":"string","format":"ipv4"},"day":{"type":"string","format":"date"},"clock":{"type":"string","format":"time"}},"required":["at","id","contact","ip","day","clock"],"additionalProperties":false})",
  };
  return corpus;
}

} // namespace tessera::test::grammar_support
