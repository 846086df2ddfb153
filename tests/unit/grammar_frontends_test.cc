// The structured-output front ends (common/grammar/json_schema.h, regex.h, choices.h) against
// independent truth: random walks through the Matcher must give documents that nlohmann::json
// parses and that hand-written checks of each schema accept; regexes agree with std::regex
// (ECMAScript) both ways; integer ranges agree with arithmetic on every value of a window;
// wrong documents are refused at the byte a reader would point at (offsets counted by hand);
// errors name the JSON pointer or the regex offset. Walks over two real vocabularies end in
// valid documents.
#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <functional>
#include <random>
#include <regex>
#include <string>
#include <vector>

#include "common/grammar/choices.h"
#include "common/grammar/compiled_grammar.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/json_schema.h"
#include "common/grammar/matcher.h"
#include "common/grammar/regex.h"
#include "common/grammar/sampler.h"
#include "common/tokenizer/tokenizer.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"

namespace tessera::grammar {
namespace {

using Json = nlohmann::ordered_json;

// --- Helpers -------------------------------------------------------------------------------

std::string SchemaGbnf(std::string_view schema_text, const JsonSchemaOptions& options = {}) {
  absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(Json::parse(schema_text), options);
  EXPECT_TRUE(gbnf.ok()) << schema_text << "\n" << gbnf.status();
  return gbnf.ok() ? *gbnf : "root ::= \"\"";
}

std::string RegexGbnf(std::string_view pattern) {
  absl::StatusOr<std::string> gbnf = RegexToGbnf(pattern);
  EXPECT_TRUE(gbnf.ok()) << pattern << "\n" << gbnf.status();
  return gbnf.ok() ? *gbnf : "root ::= \"\"";
}

std::shared_ptr<const CompiledGrammar> Compile(const std::string& gbnf) {
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status() << "\n" << gbnf;
  if (!g.ok()) g = ParseGbnf("root ::= \"\"");
  return CompiledGrammar::Create(std::move(*g), TokenTrie::Build({}, {}));
}

bool Matches(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  Matcher m(g);
  return m.AcceptBytes(text) && m.CanEnd();
}

// Index of the first byte the matcher refuses, or -1 when all are accepted.
int FirstRejectedByte(const std::shared_ptr<const CompiledGrammar>& g, std::string_view text) {
  Matcher m(g);
  for (size_t i = 0; i < text.size(); ++i) {
    if (!m.AcceptBytes(text.substr(i, 1))) return static_cast<int>(i);
  }
  return -1;
}

std::vector<std::string> Samples(const std::string& gbnf, int count, uint64_t seed,
                                 size_t soft_max_bytes = 120) {
  absl::StatusOr<Grammar> g = ParseGbnf(gbnf);
  EXPECT_TRUE(g.ok()) << g.status();
  if (!g.ok()) return {};
  GrammarSampler sampler(std::move(*g));
  SampleOptions options;
  options.soft_max_bytes = soft_max_bytes;
  std::mt19937_64 rng(seed);
  std::vector<std::string> out;
  for (int i = 0; i < count; ++i) {
    absl::StatusOr<std::string> doc = sampler.Sample(rng, options);
    EXPECT_TRUE(doc.ok()) << doc.status();
    if (doc.ok()) out.push_back(std::move(*doc));
  }
  return out;
}

size_t CodePoints(const std::string& s) {
  size_t n = 0;
  for (char c : s) n += (static_cast<uint8_t>(c) & 0xC0) != 0x80;
  return n;
}

// Checks of one schema's documents, written from the schema by hand.
using Check = std::function<void(const Json& doc, const std::string& text)>;

// Random walks through the schema's grammar: every document parses and passes `check`.
void WalkSchema(std::string_view schema_text, const Check& check, int count = 60,
                const JsonSchemaOptions& options = {}) {
  const std::string gbnf = SchemaGbnf(schema_text, options);
  for (const std::string& text : Samples(gbnf, count, 17)) {
    Json doc;
    ASSERT_NO_THROW(doc = Json::parse(text)) << schema_text << "\ndocument: " << text;
    SCOPED_TRACE(text);
    check(doc, text);
  }
}

bool IsLeapYear(int y) { return (y % 4 == 0 && y % 100 != 0) || y % 400 == 0; }

// RFC 3339 full-date with the calendar checked arithmetically.
bool IsDate(const std::string& s) {
  static const std::regex shape("([0-9]{4})-([0-9]{2})-([0-9]{2})");
  std::smatch m;
  if (!std::regex_match(s, m, shape)) return false;
  const int y = std::stoi(m[1]), mo = std::stoi(m[2]), d = std::stoi(m[3]);
  static const int days[] = {31, 28, 31, 30, 31, 30, 31, 31, 30, 31, 30, 31};
  if (y == 0 || mo < 1 || mo > 12 || d < 1) return false;
  return d <= days[mo - 1] + (mo == 2 && IsLeapYear(y));
}

bool IsTime(const std::string& s) {
  static const std::regex shape(
      "([01][0-9]|2[0-3]):[0-5][0-9]:[0-5][0-9](\\.[0-9]+)?(Z|[+-]([01][0-9]|2[0-3]):[0-5][0-9])");
  return std::regex_match(s, shape);
}

// --- JSON Schema: random walks -------------------------------------------------------------

constexpr char kPerson[] = R"({
  "type": "object",
  "properties": {
    "name": {"type": "string", "minLength": 1, "maxLength": 10},
    "age": {"type": "integer", "minimum": 0, "maximum": 150},
    "email": {"type": "string", "format": "email"},
    "tags": {"type": "array", "items": {"type": "string", "enum": ["a", "b\"c", "é"]},
             "minItems": 1, "maxItems": 3}
  },
  "required": ["name", "age"],
  "additionalProperties": false
})";

TEST(JsonSchemaWalkTest, ObjectWithBoundsFormatsAndOrder) {
  const std::regex email(
      "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@"
      "[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?(\\.[A-Za-z0-9]([A-Za-z0-9-]*[A-Za-z0-9])?)+");
  int with_email = 0, with_tags = 0;
  WalkSchema(kPerson, [&](const Json& doc, const std::string&) {
    ASSERT_TRUE(doc.is_object());
    ASSERT_TRUE(doc.contains("name") && doc.contains("age"));
    std::vector<std::string> keys;
    for (const auto& [key, value] : doc.items()) keys.push_back(key);
    // Schema order: name, age, then email and tags when present.
    const std::vector<std::string> order = {"name", "age", "email", "tags"};
    size_t at = 0;
    for (const std::string& key : keys) {
      while (at < order.size() && order[at] != key) ++at;
      ASSERT_LT(at, order.size()) << "unexpected or out-of-order key " << key;
    }
    const size_t name_length = CodePoints(doc["name"].get<std::string>());
    EXPECT_GE(name_length, 1u);
    EXPECT_LE(name_length, 10u);
    ASSERT_TRUE(doc["age"].is_number_integer());
    EXPECT_GE(doc["age"].get<int64_t>(), 0);
    EXPECT_LE(doc["age"].get<int64_t>(), 150);
    if (doc.contains("email")) {
      ++with_email;
      const std::string e = doc["email"].get<std::string>();
      EXPECT_TRUE(std::regex_match(e, email)) << e;
      EXPECT_LE(e.size(), 254u);
      EXPECT_LE(e.find('@'), 64u);
    }
    if (doc.contains("tags")) {
      ++with_tags;
      ASSERT_TRUE(doc["tags"].is_array());
      EXPECT_GE(doc["tags"].size(), 1u);
      EXPECT_LE(doc["tags"].size(), 3u);
      for (const Json& t : doc["tags"]) {
        EXPECT_TRUE(t == "a" || t == "b\"c" || t == "é") << t;
      }
    }
  });
  EXPECT_GT(with_email, 0);
  EXPECT_GT(with_tags, 0);
}

TEST(JsonSchemaWalkTest, RecursionThroughRefs) {
  constexpr char kTree[] = R"({
    "$defs": {"node": {"type": "object",
      "properties": {"value": {"type": "integer", "minimum": -20, "maximum": 1234},
                     "children": {"type": "array", "items": {"$ref": "#/$defs/node"},
                                  "maxItems": 3}},
      "required": ["value"], "additionalProperties": false}},
    "$ref": "#/$defs/node"})";
  int nested = 0;
  std::function<void(const Json&, int)> check_node = [&](const Json& n, int depth) {
    ASSERT_TRUE(n.is_object());
    ASSERT_TRUE(n.contains("value"));
    EXPECT_GE(n["value"].get<int64_t>(), -20);
    EXPECT_LE(n["value"].get<int64_t>(), 1234);
    EXPECT_LE(n.size(), 2u);
    if (n.contains("children")) {
      ASSERT_LE(n["children"].size(), 3u);
      for (const Json& c : n["children"]) {
        nested += depth == 0;
        check_node(c, depth + 1);
      }
    }
  };
  WalkSchema(kTree, [&](const Json& doc, const std::string&) { check_node(doc, 0); });
  EXPECT_GT(nested, 0);
  // "#" refers to the root.
  WalkSchema(R"({"type": "array", "items": {"anyOf": [{"type": "null"}, {"$ref": "#"}]},
                 "maxItems": 2})",
             [](const Json& doc, const std::string&) {
               std::function<void(const Json&)> check = [&](const Json& a) {
                 ASSERT_TRUE(a.is_array());
                 ASSERT_LE(a.size(), 2u);
                 for (const Json& x : a) {
                   if (!x.is_null()) check(x);
                 }
               };
               check(doc);
             });
}

TEST(JsonSchemaWalkTest, UnionsNullablesAndEnums) {
  WalkSchema(R"({"type": ["string", "null"], "maxLength": 2})",
             [](const Json& doc, const std::string&) {
               ASSERT_TRUE(doc.is_null() || doc.is_string());
               if (doc.is_string()) {
                 EXPECT_LE(CodePoints(doc.get<std::string>()), 2u);
               }
             });
  WalkSchema(R"({"anyOf": [{"type": "integer", "minimum": 5}, {"type": "boolean"}],
                 "nullable": true})",
             [](const Json& doc, const std::string&) {
               ASSERT_TRUE(doc.is_null() || doc.is_boolean() || doc.is_number_integer());
               if (doc.is_number_integer()) {
                 EXPECT_GE(doc.get<int64_t>(), 5);
               }
             });
  WalkSchema(R"({"oneOf": [{"const": {"k": [1, 2.5, "x"]}}, {"enum": ["red", 3, null, true]}]})",
             [](const Json& doc, const std::string&) {
               const std::vector<Json> allowed = {Json::parse(R"({"k": [1, 2.5, "x"]})"), "red", 3,
                                                  nullptr, true};
               EXPECT_NE(std::find(allowed.begin(), allowed.end(), doc), allowed.end());
             });
  // Values of the wrong type are dropped from an enum.
  WalkSchema(R"({"type": "string", "enum": ["a", 1, "b", null]})",
             [](const Json& doc, const std::string&) { EXPECT_TRUE(doc == "a" || doc == "b"); });
}

TEST(JsonSchemaWalkTest, ArraysWithPrefixItemsAndBounds) {
  WalkSchema(R"({"type": "array", "prefixItems": [{"type": "integer"}, {"type": "string"}],
                 "items": {"type": "boolean"}, "minItems": 1, "maxItems": 4})",
             [](const Json& doc, const std::string&) {
               ASSERT_TRUE(doc.is_array());
               ASSERT_GE(doc.size(), 1u);
               ASSERT_LE(doc.size(), 4u);
               EXPECT_TRUE(doc[0].is_number_integer());
               if (doc.size() > 1) {
                 EXPECT_TRUE(doc[1].is_string());
               }
               for (size_t i = 2; i < doc.size(); ++i) EXPECT_TRUE(doc[i].is_boolean());
             });
  WalkSchema(R"({"type": "array", "prefixItems": [{"const": "x"}, {"const": "y"}],
                 "items": false, "minItems": 1})",
             [](const Json& doc, const std::string&) {
               EXPECT_TRUE(doc == Json::parse(R"(["x"])") || doc == Json::parse(R"(["x","y"])"))
                   << doc;
             });
  WalkSchema(R"({"type": "array", "items": {"type": "null"}, "minItems": 3, "maxItems": 3})",
             [](const Json& doc, const std::string&) {
               EXPECT_EQ(doc, Json::parse("[null, null, null]"));
             });
}

TEST(JsonSchemaWalkTest, AdditionalPropertiesAndAllOf) {
  // Extra keys differ from the declared ones and their values follow the schema.
  WalkSchema(R"({"type": "object", "properties": {"id": {"type": "string", "format": "uuid"}},
                 "additionalProperties": {"type": "integer", "maximum": -1}})",
             [](const Json& doc, const std::string& text) {
               static const std::regex uuid(
                   "[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}");
               ASSERT_TRUE(doc.is_object());
               // A repeated key would collapse in the parse: count the keys in the text too.
               for (const auto& [key, value] : doc.items()) {
                 if (key == "id") {
                   EXPECT_TRUE(std::regex_match(value.get<std::string>(), uuid)) << value;
                 } else {
                   ASSERT_TRUE(value.is_number_integer()) << key;
                   EXPECT_LE(value.get<int64_t>(), -1);
                 }
               }
               EXPECT_EQ(text.find("\"id\"", 2), std::string::npos) << "id written twice";
             },
             80);
  // allOf of object schemas: properties and requirements of both; a's additionalProperties
  // false forbids b's extra property "c".
  WalkSchema(R"({"allOf": [
                   {"type": "object", "properties": {"a": {"type": "integer"},
                                                     "b": {"type": "string"}},
                    "required": ["a"], "additionalProperties": false},
                   {"properties": {"b": {"maxLength": 1}, "c": {"type": "null"}},
                    "required": ["b"]}]})",
             [](const Json& doc, const std::string&) {
               ASSERT_TRUE(doc.is_object());
               EXPECT_EQ(doc.size(), 2u);
               EXPECT_TRUE(doc["a"].is_number_integer());
               ASSERT_TRUE(doc["b"].is_string());
               EXPECT_LE(CodePoints(doc["b"].get<std::string>()), 1u);
             });
  // Keywords beside $ref are an allOf with it.
  WalkSchema(R"({"$defs": {"base": {"type": "object", "properties": {"x": {"const": 1}},
                                    "required": ["x"]}},
                 "$ref": "#/$defs/base", "properties": {"y": {"const": 2}}, "required": ["y"]})",
             [](const Json& doc, const std::string&) {
               ASSERT_TRUE(doc.is_object());
               EXPECT_EQ(doc["x"], 1);
               EXPECT_EQ(doc["y"], 2);
             });
  // allOf of other schemas: keywords combined.
  WalkSchema(R"({"allOf": [{"type": ["string", "integer"], "maxLength": 3},
                           {"type": ["integer", "null"], "minimum": 4, "maximum": 40},
                           {"maximum": 9}]})",
             [](const Json& doc, const std::string&) {
               ASSERT_TRUE(doc.is_number_integer());
               EXPECT_GE(doc.get<int64_t>(), 4);
               EXPECT_LE(doc.get<int64_t>(), 9);
             });
}

TEST(JsonSchemaWalkTest, StringsFormatsAndPatterns) {
  WalkSchema(R"({"type": "string", "format": "date"})", [](const Json& doc, const std::string&) {
    EXPECT_TRUE(IsDate(doc.get<std::string>())) << doc;
  });
  WalkSchema(R"({"type": "string", "format": "time"})", [](const Json& doc, const std::string&) {
    EXPECT_TRUE(IsTime(doc.get<std::string>())) << doc;
  });
  WalkSchema(R"({"type": "string", "format": "date-time"})",
             [](const Json& doc, const std::string&) {
               const std::string s = doc.get<std::string>();
               const size_t t = s.find('T');
               ASSERT_NE(t, std::string::npos) << s;
               EXPECT_TRUE(IsDate(s.substr(0, t))) << s;
               EXPECT_TRUE(IsTime(s.substr(t + 1))) << s;
             });
  // Patterns are searched in the value (JSON Schema); ^...$ anchors them. The value may hold
  // escaped quotes, backslashes and newlines.
  struct PatternCase {
    const char* pattern;
    const char* ecmascript;
  };
  const PatternCase cases[] = {
      {"^[A-Z]{3}-[0-9]{2,4}$", "^[A-Z]{3}-[0-9]{2,4}$"},
      {"ab+c", "ab+c"},
      {"^(foo|ba[rz])\\d?$", "^(foo|ba[rz])\\d?$"},
      {"^\"[\\\\\\n]+\"$", "^\"[\\\\\\n]+\"$"},
  };
  for (const PatternCase& c : cases) {
    const std::regex re(c.ecmascript);
    WalkSchema(Json{{"type", "string"}, {"pattern", c.pattern}}.dump(), [&](const Json& doc,
                                                                            const std::string&) {
      EXPECT_TRUE(std::regex_search(doc.get<std::string>(), re)) << c.pattern << " on " << doc;
    });
  }
}

TEST(JsonSchemaWalkTest, AnyValueAndWhitespaceBounds) {
  JsonSchemaOptions compact;
  compact.max_whitespace = 0;
  WalkSchema(
      "{}",
      [](const Json&, const std::string& text) {
        for (char c : text) EXPECT_TRUE(c != '\n' && c != '\t') << "whitespace outside strings";
      },
      40, compact);
  WalkSchema(
      "true", [](const Json&, const std::string&) {}, 40);
  // At most max_whitespace whitespace bytes between two tokens.
  const auto g = Compile(SchemaGbnf(R"({"type": "array", "items": {"type": "integer"}})"));
  EXPECT_TRUE(Matches(g, "[ \t\n 1 , \n2]"));
  EXPECT_EQ(FirstRejectedByte(g, "[     1]"), 5);
  EXPECT_EQ(FirstRejectedByte(g, " [1]"), 0);  // nothing before the value
  EXPECT_EQ(FirstRejectedByte(g, "[1] "), 3);  // nor after it
  const auto c = Compile(SchemaGbnf(R"({"type": "array"})", compact));
  EXPECT_TRUE(Matches(c, "[1,{\"a\":[]},\"x y\"]"));
  EXPECT_EQ(FirstRejectedByte(c, "[1, 2]"), 3);
}

// --- JSON Schema: numbers against arithmetic ----------------------------------------------

TEST(JsonSchemaNumberTest, IntegerRangesAgreeWithArithmeticOnEveryValueOfAWindow) {
  struct Range {
    std::string schema;
    int64_t lo, hi;  // inclusive, as computed by hand
  };
  const Range ranges[] = {
      {R"({"type": "integer", "minimum": 0, "maximum": 150})", 0, 150},
      {R"({"type": "integer", "minimum": -20, "maximum": 1234})", -20, 1234},
      {R"({"type": "integer", "exclusiveMinimum": 7, "exclusiveMaximum": 1000})", 8, 999},
      {R"({"type": "integer", "minimum": 2.5, "maximum": 99.9})", 3, 99},
      {R"({"type": "integer", "exclusiveMinimum": -3.5, "exclusiveMaximum": 3.5})", -3, 3},
      {R"({"type": "integer", "minimum": 5, "exclusiveMinimum": true, "maximum": 9})", 6, 9},
      {R"({"type": "integer", "minimum": -1999, "maximum": -1000})", -1999, -1000},
      {R"({"type": "integer", "minimum": 99999, "maximum": 100001})", 99999, 100001},
      {R"({"type": "integer", "minimum": 42, "maximum": 42})", 42, 42},
      {R"({"type": "integer", "format": "int32", "minimum": -5})", -5, 2147483647},
      {R"({"type": "integer", "minimum": -9223372036854775808, "maximum": -9223372036854775000})",
       INT64_MIN, -9223372036854775000},
  };
  for (const Range& r : ranges) {
    SCOPED_TRACE(r.schema);
    const auto g = Compile(SchemaGbnf(r.schema));
    // Every value within 300 of either bound, and a sample in between.
    std::vector<int64_t> values;
    for (int64_t d = -300; d <= 300; ++d) {
      if ((d < 0 && r.lo >= INT64_MIN - d) || d >= 0) values.push_back(r.lo + d);
      if ((d > 0 && r.hi <= INT64_MAX - d) || d <= 0) values.push_back(r.hi + d);
    }
    std::mt19937_64 rng(5);
    for (int i = 0; i < 300; ++i) {
      values.push_back(r.lo +
                       static_cast<int64_t>(rng() % (static_cast<uint64_t>(r.hi - r.lo) + 1)));
    }
    for (int64_t v : values) {
      ASSERT_EQ(Matches(g, std::to_string(v)), v >= r.lo && v <= r.hi) << v;
    }
    EXPECT_FALSE(Matches(g, "-0"));
    EXPECT_FALSE(Matches(g, "01"));
  }
  // Open sides: at most 15 digits.
  const auto open = Compile(SchemaGbnf(R"({"type": "integer", "minimum": 10})"));
  EXPECT_TRUE(Matches(open, "10"));
  EXPECT_TRUE(Matches(open, "999999999999999"));
  EXPECT_FALSE(Matches(open, "9"));
  EXPECT_FALSE(Matches(open, "-10"));
  EXPECT_FALSE(Matches(open, "1000000000000000"));
}

TEST(JsonSchemaNumberTest, NumberBoundsAgreeWithArithmetic) {
  struct Bounds {
    std::string schema;
    double lo, hi;
    bool lo_exclusive, hi_exclusive;
  };
  const double inf = INFINITY;
  const Bounds cases[] = {
      {R"({"type": "number", "minimum": 0, "maximum": 1})", 0, 1, false, false},
      {R"({"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1})", 0, 1, true, true},
      {R"({"type": "number", "minimum": -3, "exclusiveMaximum": 12})", -3, 12, false, true},
      {R"({"type": "number", "exclusiveMinimum": -20, "maximum": -2})", -20, -2, true, false},
      {R"({"type": "number", "minimum": 0})", 0, inf, false, false},
      {R"({"type": "number", "exclusiveMaximum": 0})", -inf, 0, false, true},
      {R"({"type": "number", "minimum": 7, "maximum": 7})", 7, 7, false, false},
  };
  std::mt19937_64 rng(9);
  for (const Bounds& b : cases) {
    SCOPED_TRACE(b.schema);
    const auto g = Compile(SchemaGbnf(b.schema));
    int inside = 0;
    for (int i = 0; i < 3000; ++i) {
      // Short decimals near the bounds: doubles hold them exactly enough to compare.
      std::string text = rng() % 2 ? "-" : "";
      const int magnitude = static_cast<int>(rng() % 25);
      text += std::to_string(magnitude);
      if (rng() % 2) {
        text += ".";
        const int digits = 1 + static_cast<int>(rng() % 3);
        for (int k = 0; k < digits; ++k)
          text += static_cast<char>('0' + (rng() % 3 == 0 ? 0 : rng() % 10));
      }
      const double v = std::stod(text);
      if (v == 0 && text[0] == '-') continue;  // the grammar writes no negative zero
      const bool expected =
          (b.lo_exclusive ? v > b.lo : v >= b.lo) && (b.hi_exclusive ? v < b.hi : v <= b.hi);
      inside += expected;
      ASSERT_EQ(Matches(g, text), expected) << text;
    }
    EXPECT_GT(inside, 0);
  }
}

// --- JSON Schema: refusals at the first wrong byte -----------------------------------------

TEST(JsonSchemaRejectTest, WrongDocumentsStopAtTheFirstWrongByte) {
  const auto person = Compile(SchemaGbnf(R"({"type": "object",
      "properties": {"name": {"type": "string", "maxLength": 10},
                     "age": {"type": "integer", "minimum": 0, "maximum": 150}},
      "required": ["name", "age"], "additionalProperties": false})"));
  // Offsets counted by hand.
  const std::pair<const char*, int> cases[] = {
      {R"({"name":"bob","age":151})", 22},        // 15 may only go on with 0
      {R"({"age":1,"name":"x"})", 2},             // name comes first
      {R"({"name":"01234567890"})", 19},          // the 11th character
      {R"({"name":"a"})", 11},                    // age is required
      {R"({"name":"a","age":01})", 19},           // no leading zero
      {R"({"name":"a","age":-1})", 18},           // no sign below 0
      {R"({"name":"a","age":1,"x":1})", 19},      // no additional properties
      {R"({     "name":"a","age":1})", 5},        // at most 4 whitespace characters
      {"{\"name\":\"a\\qb\",\"age\":1}", 11},     // \q is no escape
      {"{\"name\":\"a\x01\",\"age\":1}", 10},     // raw control character
      {"{\"name\":\"\\ud800x\",\"age\":1}", 15},  // a high surrogate needs a low one
  };
  for (const auto& [doc, offset] : cases) EXPECT_EQ(FirstRejectedByte(person, doc), offset) << doc;
  EXPECT_TRUE(Matches(person, R"({"name":"\ud83d\ude00\u00e9\n","age":150})"));
  EXPECT_TRUE(Matches(person, "{ \"name\" : \"é中\", \"age\" : 0 }"));

  const auto colours = Compile(SchemaGbnf(R"({"enum": ["red", "green", 3, null]})"));
  EXPECT_EQ(FirstRejectedByte(colours, R"("rex")"), 3);
  EXPECT_EQ(FirstRejectedByte(colours, "4"), 0);
  EXPECT_EQ(FirstRejectedByte(colours, "nulx"), 3);
  EXPECT_EQ(FirstRejectedByte(colours, "3.0"), 1);

  const auto date = Compile(SchemaGbnf(R"({"type": "string", "format": "date"})"));
  EXPECT_TRUE(Matches(date, R"("2024-02-29")"));
  EXPECT_TRUE(Matches(date, R"("2000-02-29")"));
  EXPECT_EQ(FirstRejectedByte(date, R"("2023-02-29")"), 10);  // 2023 is no leap year
  EXPECT_EQ(FirstRejectedByte(date, R"("1900-02-29")"), 10);  // nor is 1900
  EXPECT_EQ(FirstRejectedByte(date, R"("2023-04-31")"), 10);
  EXPECT_EQ(FirstRejectedByte(date, R"("2023-13-01")"), 7);
  EXPECT_EQ(FirstRejectedByte(date, R"("0000-01-01")"), 4);

  // An anchored pattern constrains the whole value, an unanchored one a part of it.
  const auto anchored = Compile(SchemaGbnf(R"({"type": "string", "pattern": "^[a-c]+$"})"));
  EXPECT_EQ(FirstRejectedByte(anchored, R"("abd")"), 3);
  const auto search = Compile(SchemaGbnf(R"({"type": "string", "pattern": "[0-9]{2}"})"));
  EXPECT_TRUE(Matches(search, R"("ab12cd")"));
  EXPECT_TRUE(Matches(search, R"("\"99\"")"));
  EXPECT_FALSE(Matches(search, R"("a1b2")"));
}

// --- JSON Schema: errors -------------------------------------------------------------------

TEST(JsonSchemaErrorTest, ErrorsNameThePointerAndKeyword) {
  struct ErrorCase {
    std::string schema;
    std::string message;  // expected substring
  };
  std::string deep = R"({"type": "integer"})";
  for (int i = 0; i < 200; ++i) deep = absl::StrCat(R"({"type": "array", "items": )", deep, "}");
  std::string deep_pointer;  // where the 65th level starts
  for (int i = 0; i < 64; ++i) deep_pointer += "/items";
  const std::vector<ErrorCase> cases = {
      {R"({"type": "object", "properties": {"age": {"type": "integer", "multipleOf": 5}}})",
       "json_schema at /properties/age: unsupported keyword 'multipleOf'"},
      {R"({"type": "strin"})", "json_schema at /: unknown type 'strin'"},
      {R"({"properties": {"a/b~c": {"type": "strng"}}})",
       "json_schema at /properties/a~1b~0c: unknown type 'strng'"},
      {R"({"$ref": "#/$defs/missing"})",
       "json_schema at /: $ref '#/$defs/missing' does not resolve within the schema"},
      {R"({"$ref": "https://example.com/s.json"})", "only references within the schema"},
      {R"({"$defs": {"a": {"anyOf": [{"$ref": "#/$defs/a"}, {"type": "null"}]}},
          "$ref": "#/$defs/a"})",
       "json_schema at /$defs/a/anyOf/0: $ref '#/$defs/a' refers back to itself with no object "
       "or array in between"},
      {R"({"allOf": [{"$ref": "#"}, {"type": "object"}]})", "refers back to itself"},
      {R"({"type": "string", "pattern": "a(b"})",
       "json_schema at /: 'pattern': regex at offset 1: unbalanced '(' (missing ')')"},
      {R"({"type": "number", "minimum": 0.5})",
       "json_schema at /: 'minimum' 0.5: only integer bounds are supported on a non-integer"},
      {R"({"type": "integer", "minimum": 10, "maximum": 5})",
       "no integer lies within the minimum and maximum"},
      {R"({"type": "integer", "minimum": 1e300})", "'minimum' 1e+300 is beyond the supported"},
      {R"({"type": "string", "format": "uri"})", "unsupported format 'uri'"},
      {R"({"type": "array", "items": [{"type": "string"}]})", "'items' as an array"},
      {R"({"type": "array", "uniqueItems": true})", "'uniqueItems: true' is not supported"},
      {R"({"type": "array", "minItems": 3, "maxItems": 2})", "no array satisfies 'minItems'"},
      {R"({"type": "string", "maxLength": 50000})",
       "json_schema at /: 'maxLength' 50000: the grammar would need more than 10000 rules"},
      {R"({"type": "string", "pattern": "^a$", "maxLength": 3})",
       "'pattern' together with 'minLength', 'maxLength' or 'format' is not supported"},
      {deep, absl::StrCat("json_schema at ", deep_pointer, ": schemas nest deeper than 64")},
      {absl::StrCat(R"({"const": )", std::string(300, '['), std::string(300, ']'), "}"),
       "json_schema at /: the schema nests deeper than 256 JSON levels"},
      {R"({"properties": {"a": false}, "required": ["a"]})",
       "json_schema at /properties/a: the property is required but never allowed"},
      {R"({"allOf": [{"properties": {"x": {}}, "required": ["x"]},
                     {"properties": {"y": {}}, "additionalProperties": false}]})",
       "json_schema at /properties/x: the property is required but never allowed"},
      {R"({"properties": {"a": {}}, "required": ["b"], "additionalProperties": false})",
       "required property 'b' is not in 'properties' and additionalProperties is false"},
      {"false", "json_schema at /: the schema 'false' admits no value"},
      {"3", "json_schema at /: expected a schema (an object or a boolean), found number"},
      {R"({"allOf": [{"type": "string"}, {"type": "object"}]})",
       "json_schema at /allOf/1: allOf: the branches' types have nothing in common"},
      {R"({"allOf": [{"pattern": "a"}, {"pattern": "b"}]})",
       "json_schema at /allOf/1: allOf: branches give 'pattern' different values"},
      {R"({"enum": []})", "'enum' must be a non-empty array"},
      {R"({"type": "string", "enum": [1, 2]})", "no value of 'enum'/'const' has the schema's"},
      {R"({"properties": {"x": {"type": "string", "minLength": "3"}}})",
       "json_schema at /properties/x: 'minLength' must be a non-negative integer"},
      {R"({"anyOf": [], "type": "string"})", "'anyOf' must be a non-empty array"},
      {R"({"type": "string", "enum": ["a"], "maxLength": 3})",
       "'maxLength' beside 'enum' or 'const' is not supported"},
      {R"({"properties": {"a": {"$ref": 5}}})", "json_schema at /properties/a: '$ref' must be"},
  };
  for (const ErrorCase& c : cases) {
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(Json::parse(c.schema));
    ASSERT_FALSE(gbnf.ok()) << c.schema << "\n" << *gbnf;
    EXPECT_EQ(gbnf.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(gbnf.status().message().find(c.message), std::string::npos)
        << "schema: " << c.schema << "\nerror: " << gbnf.status().message()
        << "\nexpected to contain: " << c.message;
  }
  // The rule budget is the caller's.
  JsonSchemaOptions small;
  small.max_rules = 20;
  EXPECT_FALSE(JsonSchemaToGbnf(Json::parse(kPerson), small).ok());
}

TEST(JsonSchemaErrorTest, RandomSchemasNeverCrashAndCompileWhenAccepted) {
  const std::vector<std::string> pieces = {R"({"type": "string"})",
                                           R"({"type": "integer", "minimum": -3})",
                                           "true",
                                           "false",
                                           "{}",
                                           R"({"enum": [1, "a"]})",
                                           R"({"$ref": "#"})",
                                           R"({"$ref": "#/$defs/x"})",
                                           R"({"const": 2})",
                                           R"({"type": ["null", "number"]})",
                                           R"({"format": "date"})",
                                           R"({"pattern": "a|b"})",
                                           R"({"multipleOf": 2})",
                                           "3",
                                           R"({"nullable": true})",
                                           R"({"maxItems": 1})"};
  const std::vector<std::string> wrappers = {
      R"({"type": "object", "properties": {"p": %}, "required": ["p"]})",
      R"({"type": "array", "items": %, "maxItems": 2})",
      R"({"anyOf": [%, {"type": "null"}]})",
      R"({"allOf": [%]})",
      R"({"$defs": {"x": %}, "items": {"$ref": "#/$defs/x"}})",
      R"({"prefixItems": [%, %], "items": false})",
      R"({"additionalProperties": %})"};
  std::mt19937 rng(21);
  int accepted = 0;
  for (int round = 0; round < 400; ++round) {
    std::string schema = pieces[rng() % pieces.size()];
    const int depth = 1 + static_cast<int>(rng() % 4);
    for (int d = 0; d < depth; ++d) {
      std::string w = wrappers[rng() % wrappers.size()];
      for (size_t at; (at = w.find('%')) != std::string::npos;) w.replace(at, 1, schema);
      schema = w;
    }
    absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(Json::parse(schema));
    if (!gbnf.ok()) {
      EXPECT_EQ(gbnf.status().code(), absl::StatusCode::kInvalidArgument) << schema;
      EXPECT_EQ(gbnf.status().message().rfind("json_schema at /", 0), 0u)
          << schema << ": " << gbnf.status().message();
      continue;
    }
    ++accepted;
    absl::StatusOr<Grammar> g = ParseGbnf(*gbnf);
    ASSERT_TRUE(g.ok()) << schema << "\n" << g.status() << "\n" << *gbnf;
    if (round % 8 == 0) {
      for (const std::string& text : Samples(*gbnf, 2, round, 60)) {
        EXPECT_TRUE(nlohmann::json::accept(text)) << schema << "\n" << text;
      }
    }
  }
  EXPECT_GT(accepted, 100);
}

// --- Regex ---------------------------------------------------------------------------------

TEST(RegexTest, AgreesWithStdRegexOnRandomStringsAndWalks) {
  struct Case {
    const char* pattern;
    const char* alphabet;
  };
  const Case cases[] = {
      {"[A-Z]{2}-\\d{4}", "AZb-019"},
      {"(ab|c)*d?", "abcd"},
      {"a+?b{2,3}(?:c|)", "abc"},
      {"x(y|z)+|w{0,2}", "xyzw"},
      {"[^a-c]\\w\\W", "abd_ -"},
      {"(a?){3}b", "ab"},
      {"(a|b?)*c", "abc"},
      {"[-a\\]]+", "-a]b"},
      {"\\(\\d+(\\.\\d*)?\\)", "()1.x"},
      {"^(yes|no)$", "yesno"},
      {"\\x41\\u0042[\\x30-\\x32]", "AB0123"},
  };
  std::mt19937 rng(13);
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    const std::string gbnf = RegexGbnf(c.pattern);
    const auto g = Compile(gbnf);
    const std::regex re(c.pattern);
    const std::string alphabet = c.alphabet;
    int matched = 0;
    for (int i = 0; i < 1500; ++i) {
      std::string s;
      const size_t len = rng() % 9;
      for (size_t k = 0; k < len; ++k) s += alphabet[rng() % alphabet.size()];
      const bool expected = std::regex_match(s, re);
      matched += expected;
      ASSERT_EQ(Matches(g, s), expected) << "'" << s << "'";
    }
    // Walks, and one-character changes of them both ways; std::regex reads bytes, so only
    // ASCII samples are compared (the others come from negated classes).
    int compared = 0;
    for (const std::string& s : Samples(gbnf, 40, 3)) {
      if (std::any_of(s.begin(), s.end(), [](char ch) { return ch & 0x80; })) continue;
      ++compared;
      EXPECT_TRUE(std::regex_match(s, re)) << "'" << s << "'";
      for (int k = 0; k < 6; ++k) {
        std::string t = s;
        const size_t at = t.empty() ? 0 : rng() % (t.size() + 1);
        const char ch = alphabet[rng() % alphabet.size()];
        if (k % 3 == 0 && at < t.size()) {
          t.erase(at, 1);
        } else if (k % 3 == 1) {
          t.insert(at, 1, ch);
        } else if (at < t.size()) {
          t[at] = ch;
        }
        const bool expected = std::regex_match(t, re);
        matched += expected;
        ASSERT_EQ(Matches(g, t), expected) << "'" << t << "'";
      }
    }
    EXPECT_GT(compared, 10);
    EXPECT_GT(matched, 0);
  }
}

TEST(RegexTest, HandPickedStringsBothWays) {
  struct Case {
    const char* pattern;
    std::vector<std::string> yes, no;
  };
  const std::vector<Case> cases = {
      {".", {"a", "é", "😀", "\t"}, {"\n", "\r", "\u2028", "ab", ""}},
      {"[^é]", {"e", "😀"}, {"é", ""}},
      {"\\s+", {" \t", "\u00a0\ufeff", "\u3000"}, {"a", "\u200b"}},
      {"\\S", {"a", "é"}, {" ", "\u00a0"}},
      {"\\d\\D", {"1a", "2é"}, {"12", "a1"}},
      {"\\uD83D\\uDE00|\\u{1F601}", {"😀", "😁"}, {"\xED\xA0\xBD"}},
      {"[\\u00e0-\\u00ff]+", {"éàÿ"}, {"e", "Ā"}},
      {"\\cJ\\0\\t", {std::string("\n\0\t", 3)}, {"\n0\t"}},
      {"[\\b]", {"\b"}, {"b"}},
      {"a{2}|b{2,}|c{0,2}", {"aa", "bbbb", "cc", ""}, {"a", "b", "ccc"}},
      {"a}b]", {"a}b]"}, {"ab"}},
      {"()*x(|y)", {"x", "xy"}, {"y"}},
      {"^a|b$", {"a", "b"}, {"ab", ""}},
      {"(?<word>ab)+", {"abab"}, {"aba"}},
      {"", {""}, {"a"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.pattern);
    const auto g = Compile(RegexGbnf(c.pattern));
    for (const std::string& s : c.yes) EXPECT_TRUE(Matches(g, s)) << "'" << s << "'";
    for (const std::string& s : c.no) EXPECT_FALSE(Matches(g, s)) << "'" << s << "'";
  }
  const auto g = Compile(RegexGbnf("[A-Z]{2}-\\d{4}"));
  EXPECT_EQ(FirstRejectedByte(g, "AB-12x4"), 5);
  EXPECT_EQ(FirstRejectedByte(g, "ab"), 0);
  EXPECT_EQ(FirstRejectedByte(g, "AB-12345"), 7);
}

TEST(RegexTest, ErrorsNameTheOffset) {
  std::string deep;
  for (int i = 0; i < 100; ++i) deep += "(";
  deep += "a";
  for (int i = 0; i < 100; ++i) deep += ")";
  const std::pair<std::string, std::string> cases[] = {
      {"a)", "regex at offset 1: unbalanced ')'"},
      {"(ab", "regex at offset 0: unbalanced '(' (missing ')')"},
      {"ab\\1", "regex at offset 2: backreferences are not supported"},
      {"\\k<x>", "regex at offset 0: backreferences are not supported"},
      {"a(?=b)", "regex at offset 1: lookahead assertions are not supported"},
      {"a(?!b)", "regex at offset 1: lookahead assertions are not supported"},
      {"(?<=a)b", "regex at offset 0: lookbehind assertions are not supported"},
      {"*a", "regex at offset 0: nothing to repeat"},
      {"a**", "regex at offset 2: nothing to repeat"},
      {"a{2}{3}", "regex at offset 4: nothing to repeat"},
      {"[z-a]", "regex at offset 2: character class range is reversed"},
      {"[\\d-z]", "regex at offset 1: a class escape such as \\d cannot be the end of a range"},
      {"[abc", "regex at offset 0: unterminated character class"},
      {"[]", "regex at offset 0: the character class matches no character"},
      {"a{3,1}", "regex at offset 1: repetition {3,1} has its maximum below its minimum"},
      {"a{1001}", "regex at offset 2: repetition count is above the limit of 1000"},
      {"(a{1000}){1000}", "regex at offset 9: this repetition expands the pattern to more than"},
      {"a^b", "regex at offset 1: '^' is only supported at the start"},
      {"a$b", "regex at offset 1: '$' is only supported at the end"},
      {"(a$)", "regex at offset 2: '$' is only supported at the end"},
      {"\\bword", "regex at offset 0: word boundary assertions (\\b) are not supported"},
      {"(?i)abc", "regex at offset 0: inline flags"},
      {"\\p{L}", "regex at offset 0: Unicode property escapes"},
      {"\\uD800", "regex at offset 0: a high surrogate must be followed by a low one"},
      {"\\uDC00", "regex at offset 0: a lone surrogate is not a character"},
      {"é(", "regex at offset 1: unbalanced '('"},
      {"ab\\q", "regex at offset 2: unknown escape '\\q'"},
      {"a{", "regex at offset 1: '{' does not start a quantifier"},
      {"c{,2}", "regex at offset 1: '{' does not start a quantifier"},
      {"\xff", "regex at offset 0: invalid UTF-8"},
      {"ab\\", "regex at offset 2: the pattern ends with '\\'"},
      {"\\x4", "regex at offset 0: '\\x' needs 2 hex digits"},
      {deep, "regex at offset 64: groups nested deeper than 64"},
  };
  for (const auto& [pattern, message] : cases) {
    absl::StatusOr<std::string> gbnf = RegexToGbnf(pattern);
    ASSERT_FALSE(gbnf.ok()) << pattern << "\n" << *gbnf;
    EXPECT_EQ(gbnf.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(gbnf.status().message().find(message), std::string::npos)
        << "pattern: " << pattern << "\nerror: " << gbnf.status().message()
        << "\nexpected to contain: " << message;
  }
}

TEST(RegexTest, RandomPatternsNeverCrash) {
  const std::string alphabet = "ab()[]{}|*+?.^$\\-,0123dwsuxé";
  std::mt19937 rng(8);
  int accepted = 0;
  for (int round = 0; round < 3000; ++round) {
    std::string pattern;
    const size_t len = rng() % 14;
    for (size_t i = 0; i < len; ++i) {
      const size_t k = rng() % (alphabet.size() - 1);
      pattern += alphabet[k] == '\xC3' ? std::string("é") : std::string(1, alphabet[k]);
    }
    absl::StatusOr<std::string> gbnf = RegexToGbnf(pattern);
    if (!gbnf.ok()) {
      EXPECT_EQ(gbnf.status().message().rfind("regex at offset ", 0), 0u) << pattern;
      continue;
    }
    ++accepted;
    absl::StatusOr<Grammar> g = ParseGbnf(*gbnf);
    ASSERT_TRUE(g.ok()) << pattern << "\n" << g.status() << "\n" << *gbnf;
  }
  EXPECT_GT(accepted, 300);
}

// --- Choices -------------------------------------------------------------------------------

TEST(ChoicesTest, OneOfTheStringsExactly) {
  const std::vector<std::string> choices = {"yes", "no", "maybe \"so\"", "é\n", "no"};
  absl::StatusOr<std::string> gbnf = ChoicesToGbnf(choices);
  ASSERT_TRUE(gbnf.ok()) << gbnf.status();
  const auto g = Compile(*gbnf);
  for (const std::string& c : choices) EXPECT_TRUE(Matches(g, c)) << c;
  EXPECT_FALSE(Matches(g, "ye"));
  EXPECT_FALSE(Matches(g, "yes "));
  EXPECT_EQ(FirstRejectedByte(g, "mayb!"), 4);
  EXPECT_EQ(FirstRejectedByte(g, "n0"), 1);
  for (const std::string& s : Samples(*gbnf, 30, 4)) {
    EXPECT_NE(std::find(choices.begin(), choices.end(), s), choices.end()) << s;
  }
  EXPECT_EQ(ChoicesToGbnf({}).status().message(), "choices: the list is empty");
  const std::vector<std::string> bad = {"ok", "\xC3("};
  EXPECT_EQ(ChoicesToGbnf(bad).status().message(), "choice 1 is not valid UTF-8");
}

// --- Real vocabularies ---------------------------------------------------------------------

struct LoadedVocab {
  std::vector<std::string> pieces;
  std::vector<bool> special;
};

std::optional<LoadedVocab> LoadVocab(const std::string& file) {
  auto path = testing::ConformancePath("tokenizer/" + file);
  if (!path) return std::nullopt;
  absl::StatusOr<tokenizer::Tokenizer> tok = tokenizer::Tokenizer::Open(path->string());
  if (!tok.ok()) return std::nullopt;
  LoadedVocab v;
  for (tokenizer::TokenId id = 0; id < tok->vocab().size(); ++id) {
    const tokenizer::TokenType type = tok->vocab().type(id);
    v.pieces.emplace_back(tok->Piece(id, /*render_special=*/false));
    v.special.push_back(type == tokenizer::TokenType::kControl ||
                        type == tokenizer::TokenType::kUnknown ||
                        type == tokenizer::TokenType::kUnused);
  }
  return v;
}

// Token walks through masks over a real vocabulary; after 30 tokens the walk follows the
// shortest ending, token by token (the longest allowed token that is a prefix of it).
void WalkVocab(const std::string& file) {
  std::optional<LoadedVocab> v = LoadVocab(file);
  if (!v) {
    GTEST_SKIP() << "shared conformance data not found (tokenizer/" << file
                 << "): set TESSERA_SHARED_DIR or place ../shared beside the checkout";
  }
  auto trie = TokenTrie::Build(v->pieces, v->special);
  struct Target {
    std::string gbnf;
    std::function<bool(const std::string&)> valid;
  };
  const std::regex plate("[A-Z]{2}-[0-9]{3,4}( [a-z]+)?");
  const std::vector<Target> targets = {
      {SchemaGbnf(kPerson),
       [](const std::string& text) {
         if (!nlohmann::json::accept(text)) return false;
         const Json doc = Json::parse(text);
         return doc.is_object() && doc.contains("name") && doc["age"].is_number_integer() &&
                doc["age"] >= 0 && doc["age"] <= 150 && doc.size() <= 4;
       }},
      {SchemaGbnf(R"({"type": "array", "items": {"anyOf": [{"type": "number"},
                     {"type": "string", "format": "date-time"}]}, "maxItems": 4})"),
       [](const std::string& text) {
         return nlohmann::json::accept(text) && Json::parse(text).is_array();
       }},
      {RegexGbnf("[A-Z]{2}-\\d{3,4}( [a-z]+)?"),
       [&](const std::string& text) { return std::regex_match(text, plate); }},
  };
  std::mt19937 rng(77);
  std::vector<uint64_t> words(trie->mask_words());
  for (const Target& target : targets) {
    absl::StatusOr<Grammar> byte_grammar = ParseGbnf(target.gbnf);
    ASSERT_TRUE(byte_grammar.ok());
    const GrammarSampler sampler(std::move(*byte_grammar));
    auto compiled = CompiledGrammar::Create(*ParseGbnf(target.gbnf), trie);
    for (int walk = 0; walk < 5; ++walk) {
      Matcher m(compiled);
      std::string doc;
      for (int step = 0; step < 200 && !m.MustEnd(); ++step) {
        if (m.CanEnd() && rng() % 4 == 0) break;
        m.FillMask(absl::MakeSpan(words));
        std::vector<uint32_t> allowed;
        for (uint32_t id = 0; id < trie->vocab_size(); ++id) {
          if ((words[id >> 6] >> (id & 63)) & 1) allowed.push_back(id);
        }
        ASSERT_FALSE(allowed.empty()) << "dead end at: " << doc;
        uint32_t next = allowed[rng() % allowed.size()];
        if (step >= 30) {
          absl::StatusOr<std::string> ending = sampler.ShortestEnding(doc, 1 << 16);
          ASSERT_TRUE(ending.ok()) << ending.status() << " at: " << doc;
          if (ending->empty()) break;
          size_t best = 0;
          for (uint32_t id : allowed) {
            const std::string_view piece = trie->token(id);
            if (piece.size() > best && std::string_view(*ending).substr(0, piece.size()) == piece) {
              best = piece.size();
              next = id;
            }
          }
          ASSERT_GT(best, 0u) << "no token starts the ending '" << *ending << "' at: " << doc;
        }
        ASSERT_FALSE(v->special[next]);
        ASSERT_TRUE(m.AcceptToken(next)) << "masked token refused: " << v->pieces[next];
        doc += v->pieces[next];
      }
      ASSERT_TRUE(m.CanEnd()) << "walk did not finish: " << doc;
      EXPECT_TRUE(target.valid(doc)) << doc;
    }
  }
}

TEST(FrontendsRealVocabTest, ByteLevelBpeGpt2) { WalkVocab("ggml-vocab-gpt-2.gguf"); }
TEST(FrontendsRealVocabTest, SentencePieceLlama) { WalkVocab("ggml-vocab-llama-spm.gguf"); }

}  // namespace
}  // namespace tessera::grammar
