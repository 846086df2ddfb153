// tessera grammar: compiles a structured-output constraint (JSON Schema, regex, choices, GBNF,
// JSON mode) to the GBNF text tesserad matches output against, or prints random documents of
// it, so that a schema can be checked before it is sent.
#include <cstdio>
#include <fstream>
#include <iostream>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "common/chat/tool_call_grammar.h"
#include "common/grammar/choices.h"
#include "common/grammar/gbnf_parser.h"
#include "common/grammar/json_grammar.h"
#include "common/grammar/json_schema.h"
#include "common/grammar/regex.h"
#include "common/grammar/sampler.h"
#include "nlohmann/json.hpp"
#include "tools/commands.h"
#include "tools/format.h"

namespace tessera::cli {
namespace {

constexpr char kUsage[] =
    "usage: tessera grammar (--json-schema FILE | --regex RE | --choice TEXT [--choice TEXT ...]\n"
    "                        | --gbnf FILE | --json-object\n"
    "                        | --tools FILE --tool-format NAME [--tool-function NAME]\n"
    "                          [--no-parallel-tool-calls] [--starts-in-reasoning])\n"
    "                       [--max-whitespace N] [--sample N] [--seed S] [--max-bytes M]\n"
    "\n"
    "Compiles a structured-output constraint to GBNF, the grammar text tesserad matches the\n"
    "output against, and prints it. With --sample, prints N random documents of the grammar\n"
    "instead, one per line, each as a JSON string (so that newlines survive): random walks\n"
    "through the same matcher that masks tokens while serving.\n"
    "\n"
    "  --json-schema FILE   a JSON Schema (FILE '-' reads stdin): response_format json_schema\n"
    "  --regex RE           an ECMAScript-style regular expression, matching the whole output\n"
    "  --choice TEXT        the output is one of the given texts (repeat the flag)\n"
    "  --gbnf FILE          a GBNF grammar, checked as tesserad checks it\n"
    "  --json-object        any JSON object (response_format json_object)\n"
    "  --tools FILE         a forced tool call (tool_choice \"required\"): FILE holds the\n"
    "                       request's OpenAI `tools` list; the calls are written in the markup\n"
    "                       of --tool-format (glm45, deepseek_v3, deepseek_v31, hermes,\n"
    "                       llama3_json, mistral). Markers are written as text here; tesserad\n"
    "                       names those that are special tokens of the model by id.\n"
    "  --tool-function NAME only this function (tool_choice naming it)\n"
    "  --no-parallel-tool-calls  exactly one call (parallel_tool_calls: false)\n"
    "  --starts-in-reasoning     the prompt opened <think>: reasoning and </think> first\n"
    "  --max-whitespace N   whitespace between JSON tokens for --json-schema (default 4)\n"
    "  --sample N           print N random documents instead of the grammar\n"
    "  --seed S             seed of the random walks (default 0: the same documents each run)\n"
    "  --max-bytes M        longest document (default 2048); a walk heads for the nearest end\n"
    "                       after min(200, M/2) bytes\n"
    "\n"
    "Exit status: 0 ok, 1 the constraint is refused (the message names the problem and where),\n"
    "2 usage error.\n";

int Usage(const std::string& message) {
  std::fprintf(stderr, "tessera grammar: %s\n\n%s", message.c_str(), kUsage);
  return 2;
}

int Fail(std::string_view message) {
  std::fprintf(stderr, "tessera grammar: %.*s\n", static_cast<int>(message.size()), message.data());
  return 1;
}

}  // namespace

int RunGrammar(const Args& args) {
  std::string schema_file, regex, gbnf_file, tools_file;
  chat::ToolCallGrammarOptions tool_options;
  std::vector<std::string> choices;
  bool json_object = false, have_regex = false;
  grammar::JsonSchemaOptions schema_options;
  size_t samples = 0, max_bytes = 2048;
  uint64_t seed = 0;
  bool sample = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    const bool has_value = i + 1 < args.size();
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--json-schema" && has_value) {
      schema_file = args[++i];
    } else if (a == "--regex" && has_value) {
      regex = args[++i];
      have_regex = true;
    } else if (a == "--choice" && has_value) {
      choices.push_back(args[++i]);
    } else if (a == "--gbnf" && has_value) {
      gbnf_file = args[++i];
    } else if (a == "--json-object") {
      json_object = true;
    } else if (a == "--tools" && has_value) {
      tools_file = args[++i];
    } else if (a == "--tool-format" && has_value) {
      tool_options.format = args[++i];
    } else if (a == "--tool-function" && has_value) {
      tool_options.function = args[++i];
    } else if (a == "--no-parallel-tool-calls") {
      tool_options.parallel = false;
    } else if (a == "--starts-in-reasoning") {
      tool_options.starts_in_reasoning = true;
    } else if (a == "--max-whitespace" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &schema_options.max_whitespace)) {
        return Usage("--max-whitespace needs a non-negative integer");
      }
    } else if (a == "--sample" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &samples)) return Usage("--sample needs a count");
      sample = true;
    } else if (a == "--seed" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &seed)) return Usage("--seed needs an integer");
    } else if (a == "--max-bytes" && has_value) {
      if (!absl::SimpleAtoi(args[++i], &max_bytes) || max_bytes == 0) {
        return Usage("--max-bytes needs a positive integer");
      }
    } else {
      return Usage("unexpected argument '" + a + "'");
    }
  }
  const int sources = !schema_file.empty() + have_regex + !choices.empty() + !gbnf_file.empty() +
                      json_object + !tools_file.empty();
  if (sources != 1) {
    return Usage(
        "give exactly one of --json-schema, --regex, --choice, --gbnf, --json-object, --tools");
  }
  if (!tools_file.empty() && tool_options.format.empty()) {
    return Usage("--tools needs --tool-format NAME");
  }

  absl::StatusOr<std::string> gbnf;
  if (!schema_file.empty()) {
    std::string text;
    absl::StatusOr<std::string> read = ReadWholeFile(schema_file);
    if (!read.ok()) return Fail(std::string(read.status().message()));
    text = *std::move(read);
    nlohmann::ordered_json schema;
    try {
      schema = nlohmann::ordered_json::parse(text);
    } catch (const nlohmann::json::exception& e) {
      return Fail(schema_file + " is not valid JSON: " + e.what());
    }
    gbnf = grammar::JsonSchemaToGbnf(schema, schema_options);
  } else if (!tools_file.empty()) {
    absl::StatusOr<std::string> read = ReadWholeFile(tools_file);
    if (!read.ok()) return Fail(std::string(read.status().message()));
    try {
      tool_options.tools = nlohmann::ordered_json::parse(*read);
    } catch (const nlohmann::json::exception& e) {
      return Fail(tools_file + " is not valid JSON: " + e.what());
    }
    tool_options.max_whitespace = schema_options.max_whitespace;
    gbnf = chat::ToolCallGbnf(tool_options);
  } else if (have_regex) {
    gbnf = grammar::RegexToGbnf(regex);
  } else if (!choices.empty()) {
    gbnf = grammar::ChoicesToGbnf(choices);
  } else if (!gbnf_file.empty()) {
    std::string text;
    absl::StatusOr<std::string> read = ReadWholeFile(gbnf_file);
    if (!read.ok()) return Fail(std::string(read.status().message()));
    text = *std::move(read);
    gbnf = text;
  } else {
    gbnf = std::string(grammar::kJsonObjectGbnf);
  }
  if (!gbnf.ok()) return Fail(std::string(gbnf.status().message()));
  // tesserad parses every grammar with ParseGbnf and its limits: check the same.
  absl::StatusOr<grammar::Grammar> parsed = grammar::ParseGbnf(*gbnf);
  if (!parsed.ok()) return Fail(std::string(parsed.status().message()));
  if (!sample) {
    std::fwrite(gbnf->data(), 1, gbnf->size(), stdout);
    return 0;
  }
  const grammar::GrammarSampler sampler(std::move(*parsed));
  grammar::SampleOptions options;
  options.max_bytes = max_bytes;
  options.soft_max_bytes = std::min<size_t>(200, max_bytes / 2);
  std::mt19937_64 rng(seed);
  for (size_t n = 0; n < samples; ++n) {
    absl::StatusOr<std::string> doc = sampler.Sample(rng, options);
    if (absl::IsFailedPrecondition(doc.status())) {
      return Fail(absl::StrCat(doc.status().message(), "; raise --max-bytes"));
    }
    if (!doc.ok()) return Fail(std::string(doc.status().message()));
    const std::string line =
        nlohmann::json(*doc).dump(-1, ' ', false, nlohmann::json::error_handler_t::replace) + "\n";
    std::fwrite(line.data(), 1, line.size(), stdout);
  }
  return 0;
}

}  // namespace tessera::cli
