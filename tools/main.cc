// tessera: the operator's command-line tool.
#include <cstdio>
#include <cstring>
#include <string>
#include <vector>

#include "tools/commands.h"

namespace {

struct Command {
  const char* name;
  const char* summary;
  int (*run)(const tessera::cli::Args&);
};

constexpr Command kCommands[] = {
    {"inspect", "show a GGUF model's architecture, keys, tokenizer, tensors and parts",
     tessera::cli::RunInspect},
    {"gen-model", "write a small synthetic GGUF model (tests, demos, the default model)",
     tessera::cli::RunGenModel},
    {"validate", "check in seconds that a model loads: tensors, fixups, TP plan, memory",
     tessera::cli::RunValidate},
    {"generate", "generate text offline with the CPU executor", tessera::cli::RunGenerate},
    {"eval-logits", "teacher-forced logits of a token list (float32 file)",
     tessera::cli::RunEvalLogits},
    {"tokenize", "text on stdin -> token ids", tessera::cli::RunTokenize},
    {"detokenize", "token ids on stdin -> text", tessera::cli::RunDetokenize},
    {"chat-template", "render a chat template with a JSON context", tessera::cli::RunChatTemplate},
    {"gguf", "split a GGUF into parts or merge parts (llama-gguf-split compatible)",
     tessera::cli::RunGguf},
    {"bench", "load-test an OpenAI-compatible server: latency percentiles, tokens/s",
     tessera::cli::RunBench},
    {"grammar", "compile a JSON Schema, regex or choice list to GBNF; sample documents",
     tessera::cli::RunGrammar},
};

void PrintUsage(FILE* out) {
  std::fprintf(out,
               "usage: tessera COMMAND [ARGS...]\n"
               "       tessera COMMAND --help\n\n"
               "commands:\n");
  for (const Command& c : kCommands) std::fprintf(out, "  %-14s %s\n", c.name, c.summary);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  std::string name = argv[1];
  if (name == "--help" || name == "-h" || name == "help") {
    PrintUsage(stdout);
    return 0;
  }
  if (name == "--version") {
    std::printf("tessera %s\n", TESSERA_VERSION);
    return 0;
  }
  for (const Command& c : kCommands) {
    if (name == c.name) return c.run(tessera::cli::Args(argv + 2, argv + argc));
  }
  std::fprintf(stderr, "tessera: unknown command '%s'\n\n", name.c_str());
  PrintUsage(stderr);
  return 2;
}
