// The `tessera` command-line tool's subcommands. Each takes its arguments after the
// subcommand name and returns the process exit code (0 ok, 1 failure, 2 usage error).
#pragma once

#include <string>
#include <vector>

namespace tessera::cli {

using Args = std::vector<std::string>;

int RunInspect(const Args& args);
int RunGenModel(const Args& args);
int RunValidate(const Args& args);
int RunEvalLogits(const Args& args);
int RunGenerate(const Args& args);
int RunTokenize(const Args& args);
int RunDetokenize(const Args& args);
int RunChatTemplate(const Args& args);
int RunGguf(const Args& args);
int RunBench(const Args& args);
int RunGrammar(const Args& args);

}  // namespace tessera::cli
