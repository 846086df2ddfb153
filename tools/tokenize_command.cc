// tessera tokenize: text on stdin -> token ids on stdout, with the model's own vocabulary.
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>

#include "common/tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

constexpr char kUsage[] =
    "usage: tessera tokenize --model FILE [--add-special] [--parse-special] [--json]\n"
    "\n"
    "Reads text from stdin (all of it, byte for byte) and prints its token ids on one line,\n"
    "separated by spaces, using the tokenizer stored in FILE (any GGUF with tokenizer.ggml.*\n"
    "keys, a vocab-only file included). By default no BOS/EOS is added and text that looks\n"
    "like a special token is tokenized as plain text, the convention of llama.cpp's tests.\n"
    "\n"
    "  --model FILE      the GGUF model (or any part of a split set)\n"
    "  --add-special     add BOS/EOS as the vocabulary's add_bos_token/add_eos_token say\n"
    "  --parse-special   match special-token texts (e.g. <|im_start|>) as those tokens\n"
    "  --json            print a JSON array instead\n";

}  // namespace

int RunTokenize(const Args& args) {
  std::string model;
  tokenizer::EncodeOptions options;
  bool json = false;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--model" && i + 1 < args.size()) {
      model = args[++i];
    } else if (a == "--add-special") {
      options.add_special = true;
    } else if (a == "--parse-special") {
      options.parse_special = true;
    } else if (a == "--json") {
      json = true;
    } else {
      std::fprintf(stderr, "tessera tokenize: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "tessera tokenize: --model FILE is required\n\n%s", kUsage);
    return 2;
  }
  auto tok = tokenizer::Tokenizer::Open(model);
  if (!tok.ok()) {
    std::fprintf(stderr, "tessera tokenize: %s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  const std::string text(std::istreambuf_iterator<char>(std::cin), {});
  const std::vector<tokenizer::TokenId> ids = tok->Encode(text, options);
  std::string line = json ? "[" : "";
  for (size_t i = 0; i < ids.size(); ++i) {
    if (i > 0) line += json ? "," : " ";
    line += std::to_string(ids[i]);
  }
  if (json) line += "]";
  line += "\n";
  std::fwrite(line.data(), 1, line.size(), stdout);
  return 0;
}

}  // namespace tessera::cli
