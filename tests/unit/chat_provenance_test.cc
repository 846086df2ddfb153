// RenderTracked: which bytes of a rendered prompt came from request data. Expectations are
// written by hand: the request's text in a prompt is shown between « and ».
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "common/chat/template.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"
#include "tests/support/shared_data.h"

namespace tessera::chat {
namespace {

namespace fs = std::filesystem;
using Json = nlohmann::ordered_json;

const std::tm kNow = MakeTime(2026, 1, 15, 12, 0, 0);

// The prompt with each request span wrapped in « ».
std::string Marked(const RenderedPrompt& p) {
  std::string out;
  size_t at = 0;
  for (const auto& [b, e] : p.request_spans) {
    out += p.text.substr(at, b - at) + "«" + p.text.substr(b, e - b) + "»";
    at = e;
  }
  return out + p.text.substr(at);
}

// Spans are sorted, non-empty, inside the text, and neither overlap nor touch.
void ExpectCanonical(const RenderedPrompt& p) {
  size_t end = 0;
  for (size_t i = 0; i < p.request_spans.size(); ++i) {
    const auto [b, e] = p.request_spans[i];
    EXPECT_LT(b, e) << "span " << i;
    EXPECT_LE(e, p.text.size()) << "span " << i;
    if (i > 0) {
      EXPECT_GT(b, end) << "span " << i << " overlaps or touches the one before";
    }
    end = e;
  }
}

Json Variables() {
  return Json::parse(R"({"messages": [
      {"role": "user", "content": "  hi <there>  "},
      {"role": "assistant", "content": "<think>why</think>\nanswer"}],
    "tools": [{"name": "lookup"}], "bos_token": "<s>", "add_generation_prompt": true})");
}

// RenderTracked's prompt shown with Marked; also checks that Render gives the same text.
std::string Track(const std::string& source, const Json& vars = Variables(),
                  const std::vector<std::string>& keys = {"messages", "tools", "documents"}) {
  auto tmpl = ChatTemplate::Parse(source);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  if (!tmpl.ok()) return "";
  auto tracked = tmpl->RenderTracked(vars, kNow, keys);
  auto plain = tmpl->Render(vars, kNow);
  EXPECT_TRUE(tracked.ok()) << tracked.status();
  EXPECT_TRUE(plain.ok()) << plain.status();
  if (!tracked.ok() || !plain.ok()) return "";
  EXPECT_EQ(tracked->text, *plain);
  ExpectCanonical(*tracked);
  return Marked(*tracked);
}

TEST(ChatProvenance, ConcatenationShiftsSpans) {
  EXPECT_EQ(Track("{{ '<A>' + messages[0].content + '<B>' ~ messages[1].role }}"),
            "<A>«  hi <there>  »<B>«assistant»");
  EXPECT_EQ(Track("{{ messages[0].role ~ messages[1].role }}"), "«userassistant»");
  EXPECT_EQ(Track("{{ messages[0].role * 2 }}|{{ 'ab' * 2 }}"), "«useruser»|abab");
  EXPECT_EQ(Track("{% set ns = namespace(s='') %}{% for m in messages %}"
                  "{% set ns.s = ns.s + m.role + ';' %}{% endfor %}{{ ns.s }}"),
            "«user»;«assistant»;");
}

TEST(ChatProvenance, LoopsBlocksAndMacros) {
  EXPECT_EQ(Track("{% for m in messages %}[{{ m.role }}]{{ m.content | trim }}{% endfor %}"),
            "[«user»]«hi <there>»[«assistant»]«<think>why</think>\nanswer»");
  EXPECT_EQ(Track("{% set x %}<{{ messages[0].role }}>{% endset %}{{ x ~ x }}"),
            "<«user»><«user»>");
  EXPECT_EQ(Track("{% set x | trim %}  <{{ messages[0].role }}>  {% endset %}{{ x }}"), "<«user»>");
  EXPECT_EQ(Track("{% macro f(c) %}({{ c }}){% endmacro %}{{ f(messages[0].role) }}"), "(«user»)");
  EXPECT_EQ(Track("{% macro f() %}[{{ caller() }}]{% endmacro %}"
                  "{% call f() %}{{ messages[0].role }}!{% endcall %}"),
            "[«user»!]");
  EXPECT_EQ(Track("{% filter trim %}  {{ messages[0].role }}  {% endfilter %}"), "«user»");
}

TEST(ChatProvenance, SubstringOperationsKeepExactSpans) {
  EXPECT_EQ(Track("{{ messages[0].content.strip() }}|{{ messages[0].content.lstrip() }}|"
                  "{{ messages[0].content.rstrip(' ') }}"),
            "«hi <there>»|«hi <there>  »|«  hi <there>»");
  EXPECT_EQ(Track("{{ (' [' ~ messages[0].role ~ '] ') | trim }}"), "[«user»]");
  EXPECT_EQ(Track("{{ messages[0].role[1:3] }}|{{ messages[0].role[::-1] }}|"
                  "{{ messages[0].role[0] }}|{{ (messages[0].role ~ 'ab')[2:] }}|"
                  "{{ messages[0].role | first }}|{{ messages[0].role | reverse }}"),
            "«se»|«resu»|«u»|«er»ab|«u»|«resu»");
  // GLM's and Qwen3's reasoning split.
  EXPECT_EQ(
      Track("{{ messages[1].content.split('</think>')[0].rstrip('\\n').split('<think>')[-1]"
            ".lstrip('\\n') }}|{{ messages[1].content.split('</think>')[-1].lstrip('\\n') }}"),
      "«why»|«answer»");
  EXPECT_EQ(Track("{{ messages[0].content.split() | join('+') }}|"
                  "{{ messages[1].content.splitlines() | join('|') }}|"
                  "{{ messages[1].content.partition('\\n') | join(',') }}"),
            "«hi»+«<there>»|«<think>why</think>»|«answer»|«<think>why</think>»,«\n»,«answer»");
  EXPECT_EQ(Track("{{ ('<x>' ~ messages[0].role).removeprefix('<x>') }}"), "«user»");
}

TEST(ChatProvenance, ReplaceMapsExactly) {
  // Text replaced inside request data is request data; the template's own text stays its own.
  EXPECT_EQ(Track("{{ messages[0].content.replace('<', '&lt;') }}"), "«  hi &lt;there>  »");
  EXPECT_EQ(Track("{{ ('X' ~ messages[0].role ~ 'X') | replace('X', '<M>') }}"), "<M>«user»<M>");
  EXPECT_EQ(Track("{{ 'a_b' | replace('_', messages[0].role) }}"), "a«user»b");
  EXPECT_EQ(Track("{{ ('X' ~ messages[0].role) | replace('', '.') }}"), ".X«.u.s.e.r.»");
}

TEST(ChatProvenance, JoinAndFormatPlaceEachArgument) {
  EXPECT_EQ(Track("{{ messages | map(attribute='role') | join(', ') }}"), "«user», «assistant»");
  EXPECT_EQ(Track("{{ ', '.join([messages[0].role, 'x']) }}"), "«user», x");
  EXPECT_EQ(Track("{{ '<%s>' % messages[0].role }}|{{ '<{}>'.format(messages[0].role) }}|"
                  "{{ '%-6s|' | format(messages[0].role) }}|{{ '%6s' % messages[0].role }}"),
            "<«user»>|<«user»>|«user»  ||  «user»");
  EXPECT_EQ(Track("{{ messages[0].role.center(8, '*') }}"), "**«user»**");
}

TEST(ChatProvenance, RewrittenTextIsRequestDataAsAWhole) {
  EXPECT_EQ(Track("{{ messages[0].role | upper }}|{{ messages[0].role | length }}"), "«USER»|4");
  EXPECT_EQ(Track("{{ messages[0] | tojson }}"),
            "«{\"role\": \"user\", \"content\": \"  hi <there>  \"}»");
  EXPECT_EQ(Track("{{ [messages[0].role] }}|{{ [1, 'a'] }}"), "«['user']»|[1, 'a']");
  // Object keys of request data are request data too.
  EXPECT_EQ(Track("{% for k, v in messages[0].items() %}{{ k }}={{ v | length }};{% endfor %}"),
            "«role»=4;«content»=14;");
}

TEST(ChatProvenance, TemplateTextIsNeverRequestData) {
  // Equal to request text, yet written by the template.
  EXPECT_EQ(Track("{{ bos_token }}{{ 'user' }}{% if messages[0].role == 'user' %}ok{% endif %}"
                  "{{ messages | length }}"),
            "<s>userok2");
  EXPECT_EQ(Track("{{ tools[0].name }}"), "«lookup»");
  EXPECT_EQ(Track("{{ tools[0].name }}|{{ messages[0].role }}", Variables(), {"messages"}),
            "lookup|«user»");
  EXPECT_EQ(Track("{{ messages[0].role }}", Variables(), {}), "user");
}

TEST(ChatProvenance, ErrorsMatchRender) {
  auto tmpl = ChatTemplate::Parse("{{ raise_exception('no: ' ~ messages[0].role) }}");
  ASSERT_TRUE(tmpl.ok()) << tmpl.status();
  auto tracked = tmpl->RenderTracked(Variables(), kNow);
  ASSERT_FALSE(tracked.ok());
  EXPECT_EQ(tracked.status(), tmpl->Render(Variables(), kNow).status());
  EXPECT_FALSE(tmpl->RenderTracked(Json::array(), kNow).ok());
}

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

// Python's str.strip() for ASCII whitespace.
std::string Strip(const std::string& s) {
  const char* ws = " \t\n\r\f\v";
  size_t b = s.find_first_not_of(ws);
  if (b == std::string::npos) return "";
  return s.substr(b, s.find_last_not_of(ws) - b + 1);
}

// Every case of every conformance template renders the same text with and without tracking
// (or fails the same way), and each message's text that reaches the prompt unchanged lies
// inside a request span.
TEST(ChatProvenance, ConformanceTemplatesRenderTheSameText) {
  TESSERA_REQUIRE_CONFORMANCE(dir, "chat");
  std::vector<fs::path> files;
  for (const auto& e : fs::directory_iterator(dir)) {
    if (e.path().extension() == ".json") files.push_back(e.path());
  }
  std::sort(files.begin(), files.end());
  int cases = 0;
  for (const fs::path& json_path : files) {
    fs::path jinja_path = json_path;
    jinja_path.replace_extension(".jinja");
    SCOPED_TRACE(jinja_path.filename().string());
    auto tmpl = ChatTemplate::Parse(ReadFile(jinja_path));
    ASSERT_TRUE(tmpl.ok()) << tmpl.status();
    for (const Json& c : Json::parse(ReadFile(json_path))) {
      SCOPED_TRACE(c.at("name").get<std::string>());
      ++cases;
      Json vars = c;
      vars.erase("name");
      vars.erase("expected");
      vars.erase("expected_error");
      AddHuggingFaceDefaults(&vars);
      vars.erase("kwargs");
      auto plain = tmpl->Render(vars, kNow);
      auto tracked = tmpl->RenderTracked(vars, kNow);
      ASSERT_EQ(plain.ok(), tracked.ok()) << plain.status() << " / " << tracked.status();
      if (!plain.ok()) {
        EXPECT_EQ(plain.status(), tracked.status());
        continue;
      }
      ASSERT_EQ(tracked->text, *plain);
      ExpectCanonical(*tracked);
      for (const Json& m : vars["messages"]) {
        if (!m.contains("content") || !m["content"].is_string()) continue;
        const std::string content = Strip(m["content"].get<std::string>());
        if (content.empty() || plain->find(content) == std::string::npos) continue;
        bool covered = false;
        for (size_t at = plain->find(content); at != std::string::npos && !covered;
             at = plain->find(content, at + 1)) {
          for (const auto& [b, e] : tracked->request_spans) {
            covered = covered || (b <= at && at + content.size() <= e);
          }
        }
        EXPECT_TRUE(covered) << "message text not in a request span: " << content << "\n"
                             << Marked(*tracked);
      }
    }
  }
  EXPECT_GE(cases, 63);
}

}  // namespace
}  // namespace tessera::chat
