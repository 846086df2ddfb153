// The built-in templates render the formats their model families document, and
// ResolveChatTemplate picks the model's own, a built-in or a file. Expected prompts are
// written out by hand from each family's published format.
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/status/status.h"
#include "common/chat/builtin_templates.h"
#include "common/chat/template.h"
#include "common/gguf/metadata.h"
#include "gtest/gtest.h"
#include "nlohmann/json.hpp"

namespace tessera::chat {
namespace {

using Json = nlohmann::ordered_json;

std::string RenderBuiltin(const std::string& name, const Json& vars) {
  auto source = BuiltinTemplate(name);
  EXPECT_TRUE(source.has_value()) << name;
  auto tmpl = ChatTemplate::Parse(*source);
  EXPECT_TRUE(tmpl.ok()) << tmpl.status();
  auto out = tmpl->Render(vars, MakeTime(2026, 1, 15, 12, 0, 0));
  EXPECT_TRUE(out.ok()) << out.status();
  return out.ok() ? *out : "";
}

Json Conversation() {
  return Json::parse(R"({"messages": [
      {"role": "system", "content": "Be brief."},
      {"role": "user", "content": "Hi"},
      {"role": "assistant", "content": "Hello"},
      {"role": "user", "content": "Bye"}],
    "add_generation_prompt": true, "bos_token": "<BOS>", "eos_token": "<EOS>",
    "tools": null, "documents": null})");
}

TEST(ChatBuiltinTemplates, ChatMl) {
  EXPECT_EQ(RenderBuiltin("chatml", Conversation()),
            "<|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
            "<|im_start|>assistant\nHello<|im_end|>\n<|im_start|>user\nBye<|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST(ChatBuiltinTemplates, Llama3) {
  EXPECT_EQ(RenderBuiltin("llama3", Conversation()),
            "<BOS><|start_header_id|>system<|end_header_id|>\n\nBe brief.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nHi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

TEST(ChatBuiltinTemplates, DeepSeek3) {
  EXPECT_EQ(RenderBuiltin("deepseek3", Conversation()),
            "<BOS>Be brief.<｜User｜>Hi<｜Assistant｜>Hello<｜end▁of▁sentence｜>"
            "<｜User｜>Bye<｜Assistant｜>");
}

TEST(ChatBuiltinTemplates, Glm4) {
  EXPECT_EQ(RenderBuiltin("glm4", Conversation()),
            "[gMASK]<sop><|system|>\nBe brief.<|user|>\nHi<|assistant|>\n<think></think>\nHello"
            "<|user|>\nBye<|assistant|>");
}

TEST(ChatBuiltinTemplates, UnknownNameIsNullopt) {
  EXPECT_FALSE(BuiltinTemplate("vicuna").has_value());
  EXPECT_EQ(BuiltinTemplateNames().size(), 4u);
}

TEST(ResolveChatTemplate, PrefersTheOverrideThenTheModel) {
  gguf::Metadata md;
  md.Add("tokenizer.chat_template", gguf::Value::String("{{ 'own' }}"));
  EXPECT_EQ(*ResolveChatTemplate("", md), "{{ 'own' }}");
  EXPECT_EQ(*ResolveChatTemplate("chatml", md), *BuiltinTemplate("chatml"));

  std::filesystem::path file = std::filesystem::temp_directory_path() / "tessera_chat_tmpl.jinja";
  std::ofstream(file) << "{{ 'file' }}";
  EXPECT_EQ(*ResolveChatTemplate(file.string(), md), "{{ 'file' }}");
  std::filesystem::remove(file);
}

TEST(ResolveChatTemplate, ExplainsWhatIsMissing) {
  gguf::Metadata empty;
  auto none = ResolveChatTemplate("", empty);
  ASSERT_FALSE(none.ok());
  EXPECT_EQ(none.status().code(), absl::StatusCode::kNotFound);
  EXPECT_NE(none.status().message().find("--chat-template"), std::string::npos);
  auto bad = ResolveChatTemplate("/no/such/template.jinja", empty);
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("/no/such/template.jinja"), std::string::npos);
}

}  // namespace
}  // namespace tessera::chat
