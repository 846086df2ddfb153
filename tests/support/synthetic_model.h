// Generated models for tests: model::BuildSyntheticModel written into the test's temporary
// directory. A failure to build or write is a test failure; the path is returned anyway
// (opening it then fails with a clear error).
#pragma once

#include <string>

#include "absl/strings/str_cat.h"
#include "common/model/synthetic.h"
#include "gtest/gtest.h"

namespace tessera::testing {

// <TempDir>/<prefix>-<arch>-<quant>.gguf holding the model `o` describes.
inline std::string WriteSyntheticModel(const model::SyntheticOptions& o,
                                       const std::string& prefix) {
  const std::string path =
      absl::StrCat(::testing::TempDir(), "/", prefix, "-", o.arch, "-", o.quant, ".gguf");
  auto w = model::BuildSyntheticModel(o);
  EXPECT_TRUE(w.ok()) << o.arch << " " << o.quant << ": " << w.status();
  if (w.ok()) {
    absl::Status s = w->WriteFile(path);
    EXPECT_TRUE(s.ok()) << path << ": " << s;
  }
  return path;
}

// Preset `preset` of `arch` in `quant` with `seed`, as <prefix>-<preset>-<arch>-<quant>.gguf.
inline std::string WritePresetModel(const std::string& arch, const std::string& quant,
                                    const std::string& preset, int seed,
                                    const std::string& prefix) {
  model::SyntheticOptions o;
  o.arch = arch;
  o.preset = preset;
  o.quant = quant;
  o.seed = seed;
  return WriteSyntheticModel(o, absl::StrCat(prefix, "-", preset));
}

// The "small" preset of `arch` in `quant` with `seed` (the TP and GPU executor tests' models).
inline std::string WriteSmallModel(const std::string& arch, const std::string& quant, int seed,
                                   const std::string& prefix) {
  return WritePresetModel(arch, quant, "small", seed, prefix);
}

}  // namespace tessera::testing
