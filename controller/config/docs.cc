// Text generated from the option table: `tesserad --help`, docs/configuration.md and a
// YAML dump of a configuration.
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "controller/config/daemon_config.h"
#include "controller/config/options.h"
#include "controller/config/units.h"
#include "yaml-cpp/yaml.h"

namespace tessera::config {
namespace {

constexpr Section kSections[] = {Section::kModel,      Section::kServer,      Section::kParallelism,
                                 Section::kScheduling, Section::kSupervision, Section::kLogging};

// Greedy word wrap of `text` into lines of at most `width` characters, each prefixed by
// `indent` spaces.
std::string Wrap(const std::string& text, size_t indent, size_t width) {
  std::string out, line;
  for (absl::string_view word : absl::StrSplit(text, ' ', absl::SkipEmpty())) {
    if (!line.empty() && line.size() + 1 + word.size() > width) {
      absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
      line.clear();
    }
    absl::StrAppend(&line, line.empty() ? "" : " ", word);
  }
  if (!line.empty()) absl::StrAppend(&out, std::string(indent, ' '), line, "\n");
  return out;
}

std::string DefaultText(const OptionSpec& opt) {
  if (opt.default_doc[0] != '\0') return opt.default_doc;
  return opt.default_value;
}

std::string RangeText(const OptionSpec& opt) {
  if (!opt.range.enabled) return "";
  auto shown = [&](double v) -> std::string {
    if (opt.type == OptionType::kSize) return FormatSize(static_cast<uint64_t>(v));
    if (opt.type == OptionType::kDuration) return FormatDurationText(absl::Seconds(v));
    return absl::StrCat(v);
  };
  if (opt.range.min_open) {
    return absl::StrCat("greater than ", shown(opt.range.min), ", at most ", shown(opt.range.max));
  }
  return absl::StrCat(shown(opt.range.min), " to ", shown(opt.range.max));
}

std::string FlagForm(const OptionSpec& opt) {
  if (opt.type == OptionType::kBool) return absl::StrCat("--[no-]", opt.name);
  return absl::StrCat("--", opt.name, " ", opt.value_name);
}

std::string TypeCell(const OptionSpec& opt) {
  if (opt.type != OptionType::kEnum) return TypeName(opt.type);
  return absl::StrCat("one of `", absl::StrReplaceAll(opt.choices, {{"|", "`, `"}}), "`");
}

std::string MarkdownEscape(const std::string& s) { return absl::StrReplaceAll(s, {{"|", "\\|"}}); }

}  // namespace

std::string DaemonHelpText() {
  std::string out =
      "usage: tesserad [--config FILE.yaml] [--model PATH] [OPTIONS...]\n"
      "\n"
      "Serves a GGUF model through an OpenAI-compatible REST API and gRPC. Every option can\n"
      "also be set in the YAML file given by --config, as `name: value` with the flag's\n"
      "name; flags override the file. Booleans: --flag or --no-flag (--flag=false also).\n"
      "Sizes: 8MiB, 512M, 1GB. Durations: 30s, 500ms, 2m. Full reference:\n"
      "docs/configuration.md.\n";
  for (Section section : kSections) {
    absl::StrAppend(&out, "\n", SectionTitle(section), ":\n");
    for (const OptionSpec& opt : DaemonOptions()) {
      if (opt.section != section) continue;
      std::string flag = absl::StrCat("  ", FlagForm(opt));
      std::string help = opt.help;
      if (opt.type == OptionType::kEnum) absl::StrAppend(&help, " One of ", opt.choices, ".");
      std::string dflt = DefaultText(opt);
      if (!dflt.empty()) absl::StrAppend(&help, " [default: ", dflt, "]");
      absl::StrAppend(&out, flag, "\n", Wrap(help, 8, 88));
    }
  }
  absl::StrAppend(&out,
                  "\nOther:\n  --help\n        Print this text and exit.\n"
                  "  --version\n        Print the version and exit.\n");
  return out;
}

std::string ConfigReferenceMarkdown() {
  std::string out =
      "<!-- Generated from controller/config/options.cc; do not edit by hand. Regenerate with\n"
      "     cmake --build build/default --target tessera_config_docs &&\n"
      "     build/default/controller/config/tessera_config_docs > docs/configuration.md\n"
      "     (the test config_test fails when this file and the option table differ). -->\n"
      "# tesserad configuration\n"
      "\n"
      "`tesserad` reads its options from three places, later ones winning:\n"
      "\n"
      "1. the defaults below;\n"
      "2. the YAML file named by `--config FILE` (a mapping from option name to value);\n"
      "3. the command-line flags (`--name value`, `--name=value`; booleans as `--name` and\n"
      "   `--no-name`).\n"
      "\n"
      "The API key alone has a fourth source: when neither `api-key` nor `api-key-file` is\n"
      "set, the environment variable `TESSERA_API_KEY` is used.\n"
      "\n"
      "YAML keys are spelled exactly like the flags without their dashes. A key with no value\n"
      "(`api-key:`) keeps the default. Unknown keys and flags are errors (with the nearest\n"
      "option suggested), and so is a value of the wrong type or out of range: every error\n"
      "names the file and line or the flag. `tesserad --config FILE --check` validates a file\n"
      "and the model's metadata without starting workers.\n"
      "\n"
      "```yaml\n"
      "# /etc/tessera/tesserad.yaml\n"
      "model: /models/GLM-5-UD-Q4_K_XL-00001-of-00010.gguf\n"
      "tp: 8\n"
      "max-model-len: 8192\n"
      "gpu-memory-utilization: 0.9\n"
      "host: 0.0.0.0\n"
      "api-key-file: /etc/tessera/api-key\n"
      "gpus: [0, 1, 2, 3, 4, 5, 6, 7]\n"
      "```\n"
      "\n"
      "Examples for a CPU host, 8 GPUs and several hosts are in `deploy/configs/`.\n"
      "\n"
      "## Value types\n"
      "\n"
      "| Type | Written as |\n"
      "| --- | --- |\n"
      "| string | text; quote it in YAML when it contains `:` or starts with a special character "
      "|\n"
      "| integer | `8080` |\n"
      "| number | `0.9` |\n"
      "| boolean | `true` / `false` (also yes/no, on/off, 1/0) |\n"
      "| size | bytes with an optional unit: `8MiB`, `512M`, `1GB`, `4096`. K, M, G, T, KB, MB, "
      "GB, TB are powers of 1000; KiB, MiB, GiB, TiB powers of 1024 |\n"
      "| duration | a number with a unit: `500ms`, `30s`, `2m`, `1h30m` |\n"
      "| list of strings | a YAML list `[0, 1]`, or comma-separated `0,1` (flags) |\n";
  for (Section section : kSections) {
    absl::StrAppend(&out, "\n## ", SectionTitle(section), "\n\n",
                    "| Option | Type | Default | Description |\n| --- | --- | --- | --- |\n");
    for (const OptionSpec& opt : DaemonOptions()) {
      if (opt.section != section) continue;
      std::string help = opt.help;
      std::string range = RangeText(opt);
      if (!range.empty()) absl::StrAppend(&help, " Range: ", range, ".");
      std::string dflt = DefaultText(opt);
      if (dflt.empty()) dflt = "empty";
      absl::StrAppend(&out, "| `", opt.name, "` | ", MarkdownEscape(TypeCell(opt)), " | ",
                      MarkdownEscape(dflt), " | ", MarkdownEscape(help), " |\n");
    }
  }
  return out;
}

std::string DaemonConfigToYaml(const DaemonConfig& config) {
  YAML::Emitter out;
  out << YAML::BeginMap;
  for (const OptionSpec& opt : DaemonOptions()) {
    if (std::string(opt.name) == "config") continue;
    out << YAML::Key << opt.name << YAML::Value;
    if (opt.type == OptionType::kList) {
      out << YAML::Flow << YAML::BeginSeq;
      for (const std::string& item :
           config.*std::get<std::vector<std::string> DaemonConfig::*>(opt.field)) {
        out << item;
      }
      out << YAML::EndSeq;
    } else if (std::string(opt.name) == "api-key" && !config.api_key.empty()) {
      out << "********";  // never echo the secret
    } else {
      out << FormatOptionValue(opt, config);
    }
  }
  out << YAML::EndMap;
  return absl::StrCat(out.c_str(), "\n");
}

}  // namespace tessera::config
