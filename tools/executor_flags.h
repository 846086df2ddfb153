// Flags shared by the commands that run the executor (generate, eval-logits).
#pragma once

#include <cstdio>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "tools/commands.h"
#include "worker/executor/executor.h"

namespace tessera::cli {

// Parses --exact, --dtype D, --threads N, --repack-weights MODE at args[i]. Returns how many
// arguments it used (0: not an executor flag), or -1 after printing a usage error.
inline int ParseExecutorFlag(const Args& args, size_t i, executor::ExecutorOptions& o,
                             const char* command) {
  const std::string& a = args[i];
  if (a == "--exact") {
    o.exact = true;
    return 1;
  }
  if (a != "--dtype" && a != "--threads" && a != "--repack-weights") return 0;
  if (i + 1 >= args.size()) {
    std::fprintf(stderr, "tessera %s: %s needs a value\n", command, a.c_str());
    return -1;
  }
  const std::string& v = args[i + 1];
  if (a == "--repack-weights") {
    std::optional<executor::WeightPacking> p = executor::ParseWeightPacking(v);
    if (!p) {
      std::fprintf(stderr, "tessera %s: --repack-weights: '%s' is not one of auto, on, off\n",
                   command, v.c_str());
      return -1;
    }
    o.weight_packing = *p;
    return 2;
  }
  if (a == "--threads") {
    if (!absl::SimpleAtoi(v, &o.threads) || o.threads < 1 || o.threads > 1024) {
      std::fprintf(stderr, "tessera %s: --threads: '%s' is not in 1..1024\n", command, v.c_str());
      return -1;
    }
    return 2;
  }
  if (v == "auto") {
    o.dtype = executor::ComputeDtype::kAuto;
  } else if (v == "float32" || v == "f32") {
    o.dtype = executor::ComputeDtype::kFloat32;
  } else if (v == "bfloat16" || v == "bf16") {
    o.dtype = executor::ComputeDtype::kBFloat16;
  } else if (v == "float16" || v == "f16") {
    o.dtype = executor::ComputeDtype::kFloat16;
  } else {
    std::fprintf(stderr,
                 "tessera %s: --dtype: '%s' is not one of auto, float32, bfloat16, float16\n",
                 command, v.c_str());
    return -1;
  }
  return 2;
}

// "1,2,3" -> {1, 2, 3}; nullopt for anything else.
inline std::optional<std::vector<int32_t>> ParseTokenList(const std::string& s) {
  std::vector<int32_t> out;
  for (absl::string_view piece : absl::StrSplit(s, ',')) {
    int32_t id;
    if (!absl::SimpleAtoi(piece, &id) || id < 0) return std::nullopt;
    out.push_back(id);
  }
  if (out.empty()) return std::nullopt;
  return out;
}

}  // namespace tessera::cli
