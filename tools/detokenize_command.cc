// tessera detokenize: token ids on stdin -> the text they stand for, byte for byte.
#include <cctype>
#include <cstdio>
#include <iostream>
#include <iterator>
#include <string>
#include <vector>

#include "common/tokenizer/tokenizer.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

constexpr char kUsage[] =
    "usage: tessera detokenize --model FILE [--skip-special]\n"
    "\n"
    "Reads token ids from stdin (decimal, separated by spaces, newlines or commas; a JSON\n"
    "array works too) and writes the text they decode to, exactly (no newline is added).\n"
    "Special tokens are written as their text. A SentencePiece vocabulary's dummy-prefix\n"
    "space is removed from the first token, as llama.cpp's detokenizer does.\n"
    "\n"
    "  --model FILE      the GGUF model (or any part of a split set)\n"
    "  --skip-special    write nothing for control tokens (BOS, EOS, <|im_start|>, ...)\n";

// Parses decimal ids separated by whitespace, commas or JSON brackets. False (with `error`
// naming the offending text) on anything else.
bool ParseIds(const std::string& in, std::vector<tokenizer::TokenId>* ids, std::string* error) {
  size_t i = 0;
  while (i < in.size()) {
    const unsigned char c = in[i];
    if (std::isspace(c) || c == ',' || c == '[' || c == ']') {
      ++i;
      continue;
    }
    size_t j = i;
    if (in[j] == '-') ++j;
    while (j < in.size() && std::isdigit(static_cast<unsigned char>(in[j]))) ++j;
    const std::string word = in.substr(i, j - i);
    const bool separated = j == in.size() || std::isspace(static_cast<unsigned char>(in[j])) ||
                           in[j] == ',' || in[j] == ']';
    if (word.empty() || word == "-" || !separated || word.size() > 11) {
      size_t end = in.find_first_of(" \t\r\n,]", i);
      *error = in.substr(i, end == std::string::npos ? std::string::npos : end - i);
      return false;
    }
    const long long v = std::stoll(word);
    if (v < INT32_MIN || v > INT32_MAX) {
      *error = word;
      return false;
    }
    ids->push_back(static_cast<tokenizer::TokenId>(v));
    i = j;
  }
  return true;
}

}  // namespace

int RunDetokenize(const Args& args) {
  std::string model;
  tokenizer::DecodeOptions options;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") {
      std::fputs(kUsage, stdout);
      return 0;
    } else if (a == "--model" && i + 1 < args.size()) {
      model = args[++i];
    } else if (a == "--skip-special") {
      options.render_special = false;
    } else {
      std::fprintf(stderr, "tessera detokenize: unexpected argument '%s'\n\n%s", a.c_str(), kUsage);
      return 2;
    }
  }
  if (model.empty()) {
    std::fprintf(stderr, "tessera detokenize: --model FILE is required\n\n%s", kUsage);
    return 2;
  }
  auto tok = tokenizer::Tokenizer::Open(model);
  if (!tok.ok()) {
    std::fprintf(stderr, "tessera detokenize: %s\n", std::string(tok.status().message()).c_str());
    return 1;
  }
  const std::string input(std::istreambuf_iterator<char>(std::cin), {});
  std::vector<tokenizer::TokenId> ids;
  std::string bad;
  if (!ParseIds(input, &ids, &bad)) {
    std::fprintf(stderr, "tessera detokenize: '%s' on stdin is not a token id\n", bad.c_str());
    return 1;
  }
  auto text = tok->Decode(ids, options);
  if (!text.ok()) {
    std::fprintf(stderr, "tessera detokenize: %s\n", std::string(text.status().message()).c_str());
    return 1;
  }
  std::fwrite(text->data(), 1, text->size(), stdout);
  return 0;
}

}  // namespace tessera::cli
