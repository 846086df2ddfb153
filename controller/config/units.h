// Text forms of the option value types shared by the YAML file and the flags: sizes
// ("512MiB"), durations ("30s"), booleans.
#pragma once

#include <cstdint>
#include <string>

#include "absl/status/statusor.h"
#include "absl/time/time.h"

namespace tessera::config {

// A byte count: an integer or decimal number with an optional unit. K, M, G, T and KB, MB,
// GB, TB are powers of 1000 (as llama-gguf-split reads "--split-max-size 2G"); KiB, MiB,
// GiB, TiB powers of 1024; B or no unit means bytes. Units are case-insensitive. The result
// must be a whole number of bytes.
absl::StatusOr<uint64_t> ParseSize(const std::string& text);
// The shortest exact form: "8MiB", "1GB", "4097".
std::string FormatSize(uint64_t bytes);

// A non-negative, finite duration with units: "30s", "500ms", "1m30s", "0".
absl::StatusOr<absl::Duration> ParseDurationText(const std::string& text);
std::string FormatDurationText(absl::Duration d);

// true/false, yes/no, on/off, 1/0 (case-insensitive).
absl::StatusOr<bool> ParseBoolText(const std::string& text);

}  // namespace tessera::config
