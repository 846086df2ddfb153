// JSON Schema -> GBNF, for structured output (OpenAI's response_format json_schema, vLLM's
// guided_json): a grammar of JSON documents that the schema accepts.
//
//   nlohmann::ordered_json schema = nlohmann::ordered_json::parse(text);
//   absl::StatusOr<std::string> gbnf = JsonSchemaToGbnf(schema);   // start rule `root`
//
// The document is one JSON value with nothing before or after it; between two tokens there
// may be up to `max_whitespace` characters of [ \t\n] (see JsonSchemaOptions).
//
// Supported: the draft 2020-12 subset that OpenAI's strict mode and common clients (pydantic,
// zod) write.
//  - `type`: string, number, integer, boolean, null, object, array, or a list of them.
//    Without `type` the value has the types its keywords constrain (`properties` -> object,
//    `items` -> array, `pattern` -> string, `minimum` -> number, ...), or is any JSON value
//    when there are none; `true` and `{}` are any JSON value.
//  - Objects: `properties` are written in the schema's order, each required one present and
//    each optional one present or not; then, when `additionalProperties` allows (true, the
//    default of the spec, or a schema for their values), any number of further properties
//    whose keys differ from the declared ones (such keys are written without escapes).
//    `required` names that `properties` does not declare take the additional-properties
//    schema. Property order: an nlohmann::json object iterates its keys sorted, an
//    nlohmann::ordered_json keeps the text's order — parse schemas as ordered_json to keep the
//    order the schema's author wrote (OpenAI strict mode's promise).
//  - Arrays: `items` (a schema, or false), `prefixItems`, `minItems`, `maxItems`;
//    `uniqueItems: false`.
//  - Strings: any valid JSON string (escapes included, no raw control characters);
//    `minLength`/`maxLength` in Unicode characters (a \uD83D\uDE00 pair is one);
//    `pattern` (regex.h's syntax; an unanchored search over the string's value, as the spec
//    says: anchor it with ^...$ to constrain the whole string); `format` date, time,
//    date-time, uuid, email (json_schema_values.h says which forms are written). A pattern or
//    a format with a length bound is refused.
//  - Numbers: `minimum`, `maximum`, `exclusiveMinimum`, `exclusiveMaximum` (numbers, or the
//    draft-04 / OpenAPI 3.0 booleans), exact for integers (a digit-range grammar); for
//    non-integer numbers only integer-valued bounds are supported (exact too; other bounds are
//    refused). `format` int32 and int64 bound integers; float and double change nothing.
//  - `enum`, `const` (with `type` they keep only the values of that type).
//  - `anyOf`, and `oneOf` compiled as anyOf: a value matching two branches of a oneOf is not
//    excluded. Keywords beside an anyOf/oneOf are merged into each branch like an allOf.
//  - `allOf`: the branches merged keyword by keyword: types intersected, bounds tightened,
//    enums intersected, items combined, properties merged with each branch's
//    additionalProperties applied to the others' properties (as the spec does: an
//    additionalProperties: false in one branch excludes what only another declares). Two
//    different values of any other keyword (two patterns, two anyOfs, ...) are refused.
//    Keywords beside `$ref` are an allOf with it, as in 2020-12.
//  - `$ref` to "#", "#/$defs/...", "#/definitions/..." or any JSON pointer within the schema,
//    recursion included; a cycle of references that no object or array separates is refused
//    (it describes no finite value).
//  - `nullable: true` (OpenAPI 3.0), `type: [..., "null"]` and anyOf with a null branch.
//  - Ignored (annotations): title, description, $schema, $id, $comment, examples, example,
//    default, deprecated, readOnly, writeOnly; $defs and definitions hold what $ref names.
// Any other keyword is refused with an error naming it, never ignored.
//
// The grammar writes a subset of what the schema accepts where JSON allows many spellings of
// one value: unbounded numbers have at most 15 integer and 15 fraction digits and an exponent
// of at most 2 digits (bounded ones no exponent), no "-0" integer, enum values in their
// compact nlohmann::json form, dates with 'T'/'Z' upper case and seconds below 60.
//
// Errors are InvalidArgument and name the JSON pointer of the offending schema and the
// keyword: "json_schema at /properties/age: unsupported keyword 'multipleOf'" ("/" is the
// root). Bounds keep any input cheap: the document nests at most 256 JSON levels, schemas
// nest (with $ref hops) at most 64 deep, and a schema whose grammar would pass max_rules
// rules (repetitions counted expanded, as ParseGbnf will expand them) is refused.
#pragma once

#include <cstddef>
#include <string>

#include "absl/status/statusor.h"
#include "common/grammar/gbnf_writer.h"
#include "nlohmann/json.hpp"

namespace tessera::grammar {

struct JsonSchemaOptions {
  // Whitespace allowed between two JSON tokens, at most this many of [ \t\n] (0: compact
  // JSON only). 4 is room for a space after ':' and ',' or a newline and an indent at the
  // first level, and bounded so that a model cannot stall in whitespace.
  size_t max_whitespace = 4;
  // Schemas whose grammar would have more rules than this are refused.
  size_t max_rules = 10000;
};

absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::ordered_json& schema,
                                             const JsonSchemaOptions& options = {});
// Defines the rule `name` (already reserved in `rules` by the caller) as the values `schema`
// accepts, with its helper rules, so that several schemas can share one grammar (e.g. the
// arguments of several tools). `options.max_rules` bounds `rules` as a whole. Errors as
// JsonSchemaToGbnf's.
absl::Status DefineJsonSchemaRule(const nlohmann::ordered_json& schema,
                                  const JsonSchemaOptions& options, const std::string& name,
                                  GbnfRules& rules);
// The same for a schema held as nlohmann::json (whose objects iterate their keys sorted: the
// properties are then written in that order).
absl::StatusOr<std::string> JsonSchemaToGbnf(const nlohmann::json& schema,
                                             const JsonSchemaOptions& options = {});

}  // namespace tessera::grammar
