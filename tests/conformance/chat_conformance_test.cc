// Every case of ../shared/conformance/chat/*.json renders byte for byte as Python's Jinja2
// rendered it (or fails with the message the template raised).
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "common/chat/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"

namespace tessera::chat {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// The variables HuggingFace passes: the case's fields, tools = documents = None, kwargs.
Json RenderVariables(const Json& c) {
  Json vars = Json::object();
  vars["messages"] = c.at("messages");
  vars["add_generation_prompt"] = c.at("add_generation_prompt");
  vars["bos_token"] = c.at("bos_token");
  vars["eos_token"] = c.at("eos_token");
  vars["tools"] = nullptr;
  vars["documents"] = nullptr;
  if (c.contains("kwargs")) {
    for (auto it = c["kwargs"].begin(); it != c["kwargs"].end(); ++it) vars[it.key()] = it.value();
  }
  return vars;
}

std::vector<fs::path> TemplateCaseFiles(const fs::path& dir) {
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  return files;
}

// First differing byte, for a readable failure.
std::string FirstDifference(const std::string& want, const std::string& got) {
  size_t i = 0;
  while (i < want.size() && i < got.size() && want[i] == got[i]) ++i;
  auto around = [&](const std::string& s) {
    size_t b = i < 40 ? 0 : i - 40;
    return nlohmann::json(s.substr(b, 80)).dump();
  };
  return "first difference at byte " + std::to_string(i) + "\n  want ..." + around(want) +
         "\n  got  ..." + around(got);
}

TEST(ChatConformance, EveryCaseMatchesJinja2) {
  TESSERA_REQUIRE_CONFORMANCE(dir, "chat");
  const std::tm now = MakeTime(2026, 1, 15, 12, 0, 0);
  int cases = 0, templates = 0;
  for (const fs::path& json_path : TemplateCaseFiles(dir)) {
    fs::path jinja_path = json_path;
    jinja_path.replace_extension(".jinja");
    SCOPED_TRACE(jinja_path.filename().string());
    auto tmpl = ChatTemplate::Parse(ReadFile(jinja_path));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    ++templates;
    Json all = Json::parse(ReadFile(json_path));
    for (const Json& c : all) {
      SCOPED_TRACE(c.at("name").get<std::string>());
      ++cases;
      auto got = tmpl->Render(RenderVariables(c), now);
      if (c.contains("expected_error") && !c["expected_error"].is_null()) {
        ASSERT_FALSE(got.ok()) << "rendered instead of raising: " << *got;
        EXPECT_EQ(got.status().code(), absl::StatusCode::kFailedPrecondition) << got.status();
        EXPECT_EQ(got.status().message(), c["expected_error"].get<std::string>());
        continue;
      }
      ASSERT_TRUE(got.ok()) << got.status();
      const std::string want = c.at("expected").get<std::string>();
      EXPECT_EQ(*got, want) << FirstDifference(want, *got);
    }
  }
  EXPECT_GE(templates, 7);
  EXPECT_GE(cases, 63);
}

}  // namespace
}  // namespace tessera::chat
