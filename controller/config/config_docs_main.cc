// Prints docs/configuration.md, generated from the option table:
//   tessera_config_docs > docs/configuration.md
#include <cstdio>

#include "controller/config/daemon_config.h"

int main() {
  std::fputs(tessera::config::ConfigReferenceMarkdown().c_str(), stdout);
  return 0;
}
