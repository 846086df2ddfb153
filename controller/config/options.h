// The option table: the one place where tesserad's options are declared. The loader, the
// `--help` text, docs/configuration.md and the YAML dump all walk it.
#pragma once

#include <cstdint>
#include <string>
#include <variant>
#include <vector>

#include "absl/types/span.h"
#include "controller/config/daemon_config.h"

namespace tessera::config {

enum class OptionType {
  kString,
  kEnum,  // a string from `choices`
  kInt,
  kDouble,
  kBool,
  kSize,      // bytes: "512MiB", "8M", "1GB", "4096"
  kDuration,  // "30s", "500ms", "1m30s"
  kList,      // strings: a YAML sequence, or "a,b,c"
};

enum class Section {
  kModel,
  kServer,
  kParallelism,
  kScheduling,
  kSupervision,
  kLogging,
};

// Where a parsed value goes in DaemonConfig; the alternative must match the type (checked
// by a test over the whole table).
using Field =
    std::variant<std::string DaemonConfig::*, int64_t DaemonConfig::*, double DaemonConfig::*,
                 bool DaemonConfig::*, uint64_t DaemonConfig::*, absl::Duration DaemonConfig::*,
                 std::vector<std::string> DaemonConfig::*>;

// An inclusive numeric range, `min_open` makes the lower bound exclusive. Durations compare
// in seconds, sizes in bytes.
struct Range {
  double min = 0;
  double max = 0;
  bool min_open = false;
  bool enabled = false;
};

struct OptionSpec {
  const char* name;  // the flag without dashes and the YAML key, e.g. "http-port"
  OptionType type;
  Section section;
  const char* default_value;  // parsed like user input; "" leaves the field empty/zero
  const char* default_doc;    // how the default reads in docs when not just the value; or ""
  const char* value_name;     // placeholder in help: PATH, N, HOST, ...
  const char* help;
  Field field;
  Range range = {};
  const char* choices = "";  // kEnum: "auto|float32|bfloat16|float16"
};

absl::Span<const OptionSpec> DaemonOptions();
const OptionSpec* FindOption(const std::string& name);
// The option whose name is closest (edit distance) to `name`, when close enough to be a
// plausible typo; nullptr otherwise.
const OptionSpec* NearestOption(const std::string& name);

const char* SectionTitle(Section s);
const char* TypeName(OptionType t);  // "integer", "size", ... as shown in docs and errors

// Parses `text` as the option's type into `config`. Errors say what was expected (without
// naming where the text came from: the caller adds the file and line or the flag).
absl::Status ApplyOptionText(const OptionSpec& opt, const std::string& text, DaemonConfig* config);
// Appends a list item (kList) parsed from `text`.
absl::Status AppendListItem(const OptionSpec& opt, const std::string& text, DaemonConfig* config);
// Checks the option's range against its current value in `config`.
absl::Status CheckRange(const OptionSpec& opt, const DaemonConfig& config);
// The option's value in `config` written as the parsers read it back ("8MiB", "30s", "0,1").
std::string FormatOptionValue(const OptionSpec& opt, const DaemonConfig& config);

}  // namespace tessera::config
