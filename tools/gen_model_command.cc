// tessera gen-model: writes a synthetic GGUF of any supported architecture.
#include <cstdio>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "common/model/arch.h"
#include "common/model/synthetic.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

std::string Usage() {
  return "usage: tessera gen-model --arch ARCH [--preset P] [--quant Q] [--seed N]\n"
         "                         [--layers N] [--nextn N] [--split-max-tensors N] -o FILE\n"
         "\n"
         "Writes a synthetic model: deterministic random weights laid out exactly as the\n"
         "reference converter writes them, a small byte-level BPE vocabulary with the family's\n"
         "special tokens, and a chat template.\n"
         "\n"
         "  --arch ARCH              " +
         absl::StrJoin(model::SupportedArchNames(), ", ") +
         "\n"
         "                           (default llama)\n"
         "  --preset P               tiny (default; the embedded default model), small,\n"
         "                           uneven (every arch: 8 heads, 2 KV heads, FFN 768, MoE 6\n"
         "                           experts of 192: splits that tensor parallelism cannot\n"
         "                           divide evenly, expert parallelism at K-quants),\n"
         "                           ep-1408 (MoE archs: as uneven, experts of 1,408),\n"
         "                           124m (llama only: hidden 768, 12 layers, vocab 32000),\n"
         "                           moe-1g (deepseek2 only: 64 experts top-8, ~1 GB at Q8_0),\n"
         "                           moe-1g-ep (the same with experts of 480 columns, which\n"
         "                           2 or 4 ranks cannot share evenly: expert parallelism), or\n"
         "                           glm5-shape (GLM-5's real dimensions, --arch glm-dsa only,\n"
         "                           sparse files: real header, data as holes, 10 parts);\n"
         "                           likewise deepseek-v3-shape (deepseek2), qwen3-235b-shape\n"
         "                           and qwen3-30b-shape (qwen3moe), glm45-air-shape (glm4moe),\n"
         "                           Q4_K_M by default: for `tessera validate --tp N`\n"
         "  --quant Q                " +
         absl::StrJoin(model::SyntheticQuants(), ", ") +
         "\n"
         "                           (default F32; glm5-shape defaults to UD-Q4_K_XL)\n"
         "  --seed N                 random seed (default 1)\n"
         "  --layers N               trunk blocks (default: the preset's)\n"
         "  --nextn N                NextN/MTP blocks after the trunk, 0..4 (default: the\n"
         "                           preset's: 1 for glm-dsa, glm4moe and the DeepSeek-V3 /\n"
         "                           GLM shapes, else 0), e.g. a deepseek2 draft head\n"
         "  --split-max-tensors N    write a split set with at most N tensors per part;\n"
         "                           FILE is then the prefix: FILE-00001-of-0000K.gguf\n"
         "  -o, --out FILE           output file\n";
}

}  // namespace

int RunGenModel(const Args& args) {
  model::SyntheticOptions o;
  std::string out;
  size_t split_max = 0;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(Usage().c_str(), stdout);
      return 0;
    }
    if (i + 1 >= args.size()) {
      std::fprintf(stderr, "tessera gen-model: '%s' needs a value or is unknown\n\n%s", a.c_str(),
                   Usage().c_str());
      return 2;
    }
    const std::string& v = args[++i];
    if (a == "-o" || a == "--out") {
      out = v;
    } else if (a == "--arch") {
      o.arch = v;
    } else if (a == "--preset") {
      o.preset = v;
    } else if (a == "--quant") {
      o.quant = v;
    } else if (a == "--seed") {
      if (!absl::SimpleAtoi(v, &o.seed)) {
        std::fprintf(stderr, "tessera gen-model: --seed: '%s' is not a number\n", v.c_str());
        return 2;
      }
    } else if (a == "--layers") {
      if (!absl::SimpleAtoi(v, &o.layers) || o.layers < 1 || o.layers > 1000) {
        std::fprintf(stderr, "tessera gen-model: --layers: '%s' is not in 1..1000\n", v.c_str());
        return 2;
      }
    } else if (a == "--nextn") {
      if (!absl::SimpleAtoi(v, &o.nextn) || o.nextn < 0 || o.nextn > 4) {
        std::fprintf(stderr, "tessera gen-model: --nextn: '%s' is not in 0..4\n", v.c_str());
        return 2;
      }
    } else if (a == "--split-max-tensors") {
      if (!absl::SimpleAtoi(v, &split_max) || split_max == 0) {
        std::fprintf(stderr,
                     "tessera gen-model: --split-max-tensors: '%s' is not a positive "
                     "number\n",
                     v.c_str());
        return 2;
      }
    } else {
      std::fprintf(stderr, "tessera gen-model: unknown option '%s'\n\n%s", a.c_str(),
                   Usage().c_str());
      return 2;
    }
  }
  if (out.empty()) {
    std::fprintf(stderr, "tessera gen-model: -o FILE is required\n\n%s", Usage().c_str());
    return 2;
  }
  auto w = model::BuildSyntheticModel(o);
  if (!w.ok()) {
    std::fprintf(stderr, "tessera gen-model: %s\n", std::string(w.status().message()).c_str());
    return 1;
  }
  if (split_max == 0 && o.preset == "glm5-shape") split_max = (w->tensor_count() + 9) / 10;
  if (split_max > 0) {
    auto parts = w->WriteSplit(out, split_max);
    if (!parts.ok()) {
      std::fprintf(stderr, "tessera gen-model: %s\n",
                   std::string(parts.status().message()).c_str());
      return 1;
    }
    std::fprintf(stderr, "wrote %zu parts: %s ... (%zu tensors)\n", parts->size(),
                 parts->front().c_str(), w->tensor_count());
    return 0;
  }
  absl::Status s = w->WriteFile(out);
  if (!s.ok()) {
    std::fprintf(stderr, "tessera gen-model: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  std::fprintf(stderr, "wrote %s: %s %s %s, %zu tensors\n", out.c_str(), o.arch.c_str(),
               o.preset.c_str(), o.quant.c_str(), w->tensor_count());
  return 0;
}

}  // namespace tessera::cli
