// LoadDaemonConfig: defaults, then the YAML file, then flags, then the API key sources,
// then validation.
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>
#include <optional>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "controller/config/daemon_config.h"
#include "controller/config/options.h"
#include "controller/config/units.h"
#include "yaml-cpp/yaml.h"

namespace tessera::config {
namespace {

enum class Origin { kDefault, kFile, kFlag };
using Origins = std::map<std::string, Origin>;

std::string DidYouMean(const std::string& name, const char* dashes) {
  const OptionSpec* near = NearestOption(name);
  return near ? absl::StrCat(" (did you mean ", dashes, near->name, "?)") : "";
}

// "tesserad.yaml:12: http-port: ..." (yaml-cpp lines are 0-based).
std::string Where(const std::string& file, const YAML::Mark& mark) {
  if (mark.is_null()) return file;
  return absl::StrCat(file, ":", mark.line + 1);
}

absl::Status FileError(const std::string& file, const YAML::Node& node, const std::string& key,
                       const std::string& message) {
  return absl::InvalidArgumentError(
      absl::StrCat(Where(file, node.Mark()), ": ", key, ": ", message));
}

absl::Status ApplyYamlValue(const std::string& file, const OptionSpec& opt, const YAML::Node& value,
                            DaemonConfig* config) {
  std::string expected = opt.type == OptionType::kEnum ? absl::StrCat("one of ", opt.choices)
                                                       : absl::StrCat("a ", TypeName(opt.type));
  if (value.IsSequence()) {
    if (opt.type != OptionType::kList) {
      return FileError(file, value, opt.name, absl::StrCat("expected ", expected, ", got a list"));
    }
    (config->*std::get<std::vector<std::string> DaemonConfig::*>(opt.field)).clear();
    for (const YAML::Node& item : value) {
      if (!item.IsScalar()) {
        return FileError(file, item, opt.name, "list items must be plain values");
      }
      absl::Status s = AppendListItem(opt, item.Scalar(), config);
      if (!s.ok()) return FileError(file, item, opt.name, std::string(s.message()));
    }
    return absl::OkStatus();
  }
  if (!value.IsScalar()) {
    return FileError(file, value, opt.name, absl::StrCat("expected ", expected, ", got a mapping"));
  }
  absl::Status s = ApplyOptionText(opt, value.Scalar(), config);
  if (!s.ok()) return FileError(file, value, opt.name, std::string(s.message()));
  return absl::OkStatus();
}

absl::Status ApplyYamlFile(const std::string& file, DaemonConfig* config, Origins* origins) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(file, ec)) {
    return absl::NotFoundError(absl::StrCat("config file ", file, ": not found or not a file"));
  }
  YAML::Node root;
  try {
    root = YAML::LoadFile(file);
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(file, e.mark), ": YAML syntax error: ", e.msg));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("config file ", file, ": ", e.what()));
  }
  if (root.IsNull()) return absl::OkStatus();  // an empty file sets nothing
  if (!root.IsMap()) {
    return absl::InvalidArgumentError(
        absl::StrCat(Where(file, root.Mark()),
                     ": expected a mapping of option names to values (http-port: 8080)"));
  }
  for (const auto& kv : root) {
    const YAML::Node& key = kv.first;
    if (!key.IsScalar()) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(file, key.Mark()), ": option names must be plain strings"));
    }
    const std::string name = key.Scalar();
    const OptionSpec* opt = FindOption(name);
    if (opt == nullptr) {
      return absl::InvalidArgumentError(absl::StrCat(Where(file, key.Mark()), ": unknown option '",
                                                     name, "'", DidYouMean(name, "")));
    }
    if (name == "config") {
      return absl::InvalidArgumentError(absl::StrCat(
          Where(file, key.Mark()), ": 'config' can only be given on the command line"));
    }
    if ((*origins)[name] == Origin::kFile) {
      return absl::InvalidArgumentError(
          absl::StrCat(Where(file, key.Mark()), ": option '", name, "' is set twice"));
    }
    (*origins)[name] = Origin::kFile;
    if (kv.second.IsNull()) continue;  // `key:` with no value keeps the default
    absl::Status s = ApplyYamlValue(file, *opt, kv.second, config);
    if (!s.ok()) return s;
  }
  return absl::OkStatus();
}

absl::Status FlagError(const std::string& flag, const std::string& message) {
  return absl::InvalidArgumentError(absl::StrCat("--", flag, ": ", message));
}

// An enum option whose values include on and off: also a bare --flag or --no-flag.
static bool IsOnOffEnum(const OptionSpec& opt) {
  if (opt.type != OptionType::kEnum) return false;
  const std::vector<std::string> values = absl::StrSplit(opt.choices, '|');
  return std::find(values.begin(), values.end(), "on") != values.end() &&
         std::find(values.begin(), values.end(), "off") != values.end();
}

absl::Status ApplyFlags(const std::vector<std::string>& args, DaemonConfig* config,
                        Origins* origins) {
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (!absl::StartsWith(arg, "--") || arg.size() == 2) {
      std::string hint = absl::EndsWith(arg, ".gguf") ? " (to serve a model: --model PATH)" : "";
      return absl::InvalidArgumentError(
          absl::StrCat("unexpected argument '", arg, "': options are --flag VALUE", hint));
    }
    std::string name = arg.substr(2);
    std::optional<std::string> value;
    if (size_t eq = name.find('='); eq != std::string::npos) {
      value = name.substr(eq + 1);
      name.resize(eq);
    }
    const OptionSpec* opt = FindOption(name);
    bool negated = false;
    if (opt == nullptr && absl::StartsWith(name, "no-")) {
      const OptionSpec* base = FindOption(name.substr(3));
      if (base != nullptr && (base->type == OptionType::kBool || IsOnOffEnum(*base))) {
        if (value) return FlagError(name, "takes no value");
        opt = base;
        negated = true;
      }
    }
    if (opt != nullptr && IsOnOffEnum(*opt) && !value &&
        (negated || i + 1 >= args.size() || absl::StartsWith(args[i + 1], "--"))) {
      // --flag / --no-flag of an auto|on|off option: on / off.
      (*origins)[opt->name] = Origin::kFlag;
      absl::Status s = ApplyOptionText(*opt, negated ? "off" : "on", config);
      if (!s.ok()) return FlagError(name, std::string(s.message()));
      continue;
    }
    if (opt == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown flag --", name, DidYouMean(name, "--")));
    }
    (*origins)[opt->name] = Origin::kFlag;
    if (opt->type == OptionType::kBool && !value) {
      config->*std::get<bool DaemonConfig::*>(opt->field) = !negated;
      continue;
    }
    if (!value) {
      if (i + 1 >= args.size()) {
        return FlagError(name, absl::StrCat("needs a value (", opt->value_name, ", a ",
                                            TypeName(opt->type), ")"));
      }
      value = args[++i];
    }
    absl::Status s = ApplyOptionText(*opt, *value, config);
    if (!s.ok()) return FlagError(name, std::string(s.message()));
  }
  return absl::OkStatus();
}

absl::Status ResolveApiKey(const Origins& origins, DaemonConfig* config) {
  auto origin = [&](const char* name) {
    auto it = origins.find(name);
    return it == origins.end() ? Origin::kDefault : it->second;
  };
  bool has_key = !config->api_key.empty();
  bool has_file = !config->api_key_file.empty();
  if (has_key && has_file) {
    // A flag overrides the file's choice of source; the same layer giving both is ambiguous.
    if (origin("api-key") == origin("api-key-file")) {
      return absl::InvalidArgumentError(
          "api-key and api-key-file are both set; keep one (api-key-file is safer)");
    }
    if (origin("api-key") == Origin::kFlag) return absl::OkStatus();
  }
  if (has_file) {
    std::ifstream in(config->api_key_file);
    std::string line;
    if (!in || !std::getline(in, line)) {
      return absl::InvalidArgumentError(
          absl::StrCat("api-key-file ", config->api_key_file, ": cannot read it or it is empty"));
    }
    config->api_key = std::string(absl::StripAsciiWhitespace(line));
    if (config->api_key.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("api-key-file ", config->api_key_file, ": the first line is empty"));
    }
    return absl::OkStatus();
  }
  if (!has_key) {
    const char* env = std::getenv("TESSERA_API_KEY");
    if (env != nullptr) config->api_key = std::string(absl::StripAsciiWhitespace(env));
  }
  return absl::OkStatus();
}

void ResolveComputedDefaults(DaemonConfig* config) {
  if (config->cache_dir.empty()) {
    const char* xdg = std::getenv("XDG_CACHE_HOME");
    const char* home = std::getenv("HOME");
    if (xdg != nullptr && xdg[0] == '/') {
      config->cache_dir = absl::StrCat(xdg, "/tessera");
    } else if (home != nullptr && home[0] != '\0') {
      config->cache_dir = absl::StrCat(home, "/.cache/tessera");
    } else {
      config->cache_dir = "/var/cache/tessera";
    }
  }
  if (config->worker_binary.empty()) {
    std::error_code ec;
    std::filesystem::path self = std::filesystem::read_symlink("/proc/self/exe", ec);
    config->worker_binary =
        ec ? "tessera-worker" : (self.parent_path() / "tessera-worker").string();
  }
}

}  // namespace

DaemonConfig DefaultDaemonConfig() {
  DaemonConfig config;
  for (const OptionSpec& opt : DaemonOptions()) {
    // The table's defaults are checked to parse by a test.
    (void)ApplyOptionText(opt, opt.default_value, &config);
  }
  ResolveComputedDefaults(&config);
  return config;
}

absl::StatusOr<DaemonConfig> LoadDaemonConfig(const std::vector<std::string>& args) {
  DaemonConfig config;
  for (const OptionSpec& opt : DaemonOptions()) {
    (void)ApplyOptionText(opt, opt.default_value, &config);
  }
  for (const std::string& a : args) {
    if (a == "--help" || a == "-h") config.show_help = true;
    if (a == "--version") config.show_version = true;
  }
  if (config.show_help || config.show_version) return config;

  // The file first, wherever --config appears, so that every flag overrides it.
  Origins origins;
  {
    DaemonConfig scratch;
    Origins ignored;
    std::vector<std::string> only_config;
    for (size_t i = 0; i < args.size(); ++i) {
      if (args[i] == "--config" && i + 1 < args.size()) {
        only_config = {args[i], args[i + 1]};
      } else if (absl::StartsWith(args[i], "--config=")) {
        only_config = {args[i]};
      }
    }
    absl::Status s = ApplyFlags(only_config, &scratch, &ignored);
    if (!s.ok()) return s;
    if (!scratch.config_file.empty()) {
      s = ApplyYamlFile(scratch.config_file, &config, &origins);
      if (!s.ok()) return s;
    }
  }
  absl::Status s = ApplyFlags(args, &config, &origins);
  if (!s.ok()) return s;
  s = ResolveApiKey(origins, &config);
  if (!s.ok()) return s;
  ResolveComputedDefaults(&config);
  s = ValidateDaemonConfig(config);
  if (!s.ok()) return s;
  return config;
}

absl::StatusOr<DaemonConfig> LoadDaemonConfig(int argc, char** argv) {
  std::vector<std::string> args;
  for (int i = 1; i < argc; ++i) args.emplace_back(argv[i]);
  return LoadDaemonConfig(args);
}

absl::Status ValidateDaemonConfig(const DaemonConfig& c) {
  for (const OptionSpec& opt : DaemonOptions()) {
    absl::Status s = CheckRange(opt, c);
    if (!s.ok()) return s;
  }
  auto fail = [](auto&&... parts) { return absl::InvalidArgumentError(absl::StrCat(parts...)); };
  if (c.host.empty()) return fail("host is empty; use 127.0.0.1, or 0.0.0.0 for every address");
  if (c.control_host.empty()) return fail("control-host is empty");
  if (c.http_port != 0 && c.http_port == c.grpc_port) {
    return fail("http-port and grpc-port are both ", c.http_port, "; they must differ");
  }
  if (c.control_port != 0 && (c.control_port == c.http_port || c.control_port == c.grpc_port)) {
    return fail("control-port ", c.control_port, " is also the HTTP or gRPC port");
  }
  if (c.external_workers && c.control_port == 0) {
    return fail(
        "external-workers needs a fixed control-port (workers on other hosts must "
        "know where to connect)");
  }
  if (c.cpu_workers > 0 && c.tp > 1 && c.tp != c.cpu_workers) {
    return fail("tp is ", c.tp, " but cpu-workers is ", c.cpu_workers,
                "; cpu-workers sets the tensor-parallel size on CPU, give one of them");
  }
  if (c.cpu_workers > 0 && !c.gpus.empty()) {
    return fail("cpu-workers and gpus are both set; CPU workers use no GPU");
  }
  if (!c.gpus.empty() && static_cast<int64_t>(c.gpus.size()) < c.tp) {
    return fail("gpus lists ", c.gpus.size(), " device(s) but tp is ", c.tp);
  }
  if (c.heartbeat_timeout <= c.heartbeat_interval) {
    return fail("heartbeat-timeout (", FormatDurationText(c.heartbeat_timeout),
                ") must be longer than heartbeat-interval (",
                FormatDurationText(c.heartbeat_interval), ")");
  }
  if (c.restart_backoff > c.restart_backoff_max) {
    return fail("restart-backoff (", FormatDurationText(c.restart_backoff),
                ") is longer than restart-backoff-max (", FormatDurationText(c.restart_backoff_max),
                ")");
  }
  if (c.max_model_len > 0 && c.max_prompt_tokens > c.max_model_len) {
    return fail("max-prompt-tokens ", c.max_prompt_tokens, " exceeds max-model-len ",
                c.max_model_len);
  }
  if (c.max_model_len > 0 && c.max_tokens_default > c.max_model_len) {
    return fail("max-tokens-default ", c.max_tokens_default, " exceeds max-model-len ",
                c.max_model_len);
  }
  if (c.exact && c.dtype != "auto" && c.dtype != "float32") {
    return fail("exact computes in float32 but dtype is ", c.dtype);
  }
  return absl::OkStatus();
}

}  // namespace tessera::config
