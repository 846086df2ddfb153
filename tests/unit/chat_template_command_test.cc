// `tessera chat-template` driven in-process: the prompt printed exactly, the model's own
// template and special tokens, overrides, and the exit codes of the error paths.
#include <filesystem>
#include <fstream>
#include <string>

#include "common/gguf/writer.h"
#include "gtest/gtest.h"
#include "tools/commands.h"

namespace tessera::cli {
namespace {

namespace fs = std::filesystem;

class ChatTemplateCommand : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ =
        fs::temp_directory_path() /
        ("tessera_chat_cli_" + std::to_string(::testing::UnitTest::GetInstance()->random_seed()) +
         "_" + ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::create_directories(dir_);
  }
  void TearDown() override { fs::remove_all(dir_); }

  std::string Write(const std::string& name, const std::string& text) {
    fs::path p = dir_ / name;
    std::ofstream(p, std::ios::binary) << text;
    return p.string();
  }

  int Run(const Args& args, std::string* out, std::string* err) {
    ::testing::internal::CaptureStdout();
    ::testing::internal::CaptureStderr();
    int rc = RunChatTemplate(args);
    *out = ::testing::internal::GetCapturedStdout();
    *err = ::testing::internal::GetCapturedStderr();
    return rc;
  }

  fs::path dir_;
};

constexpr char kContext[] =
    R"({"messages": [{"role": "user", "content": "Hi"}], "add_generation_prompt": true})";

TEST_F(ChatTemplateCommand, PrintsThePromptExactly) {
  std::string tmpl = Write("t.jinja",
                           "{% for m in messages %}<{{ m.role }}>{{ m.content }}\n{% endfor %}"
                           "{% if add_generation_prompt %}<assistant>{% endif %}"
                           "[{{ tools }}][{{ strftime_now('%Y') }}]\n");
  std::string ctx = Write("c.json", kContext);
  std::string out, err;
  ASSERT_EQ(Run({"--template", tmpl, "--context", ctx, "--now", "2026-01-15 12:00:00"}, &out, &err),
            0)
      << err;
  // The template's single trailing newline is dropped, as Jinja2 does; none is added; tools
  // defaults to None as HuggingFace passes it.
  EXPECT_EQ(out, "<user>Hi\n<assistant>[None][2026]");
}

TEST_F(ChatTemplateCommand, RaiseExceptionExitsOneWithTheMessage) {
  std::string tmpl = Write("t.jinja", "{{ raise_exception('Conversation roles must alternate') }}");
  std::string ctx = Write("c.json", kContext);
  std::string out, err;
  EXPECT_EQ(Run({"--template", tmpl, "--context", ctx}, &out, &err), 1);
  EXPECT_EQ(out, "");
  EXPECT_NE(err.find("Conversation roles must alternate"), std::string::npos) << err;
}

TEST_F(ChatTemplateCommand, ConformanceCaseKwargsAreMerged) {
  std::string tmpl = Write("t.jinja", "{{ 'think' if enable_thinking else 'no' }}");
  std::string ctx = Write("c.json", R"({"name": "x", "messages": [], "kwargs":
                                        {"enable_thinking": false}, "expected": "no"})");
  std::string out, err;
  ASSERT_EQ(Run({"--template", tmpl, "--context", ctx}, &out, &err), 0) << err;
  EXPECT_EQ(out, "no");
}

TEST_F(ChatTemplateCommand, BuiltinTemplateWithoutAModel) {
  std::string ctx = Write("c.json", kContext);
  std::string out, err;
  ASSERT_EQ(Run({"--chat-template", "chatml", "--context", ctx}, &out, &err), 0) << err;
  EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(ChatTemplateCommand, ModelTemplateAndSpecialTokens) {
  gguf::GgufWriter w;
  w.metadata().Set("general.architecture", gguf::Value::String("llama"));
  w.metadata().Set("tokenizer.ggml.tokens", gguf::Value::StringArray({"<unk>", "<s>", "</s>"}));
  w.metadata().Set("tokenizer.ggml.bos_token_id", gguf::Value::U32(1));
  w.metadata().Set("tokenizer.ggml.eos_token_id", gguf::Value::U32(2));
  w.metadata().Set("tokenizer.chat_template",
                   gguf::Value::String("{{ bos_token }}{{ messages[0].content }}{{ eos_token }}"));
  std::string model = (dir_ / "m.gguf").string();
  ASSERT_TRUE(w.WriteFile(model).ok());
  std::string ctx = Write("c.json", kContext);
  std::string out, err;
  ASSERT_EQ(Run({"--model", model, "--context", ctx}, &out, &err), 0) << err;
  EXPECT_EQ(out, "<s>Hi</s>");
  // The context's own tokens win over the model's; --chat-template overrides its template.
  std::string ctx2 = Write("c2.json", R"({"messages": [{"role": "user", "content": "Hi"}],
                                         "bos_token": "[B]", "eos_token": "[E]"})");
  ASSERT_EQ(Run({"--model", model, "--context", ctx2}, &out, &err), 0) << err;
  EXPECT_EQ(out, "[B]Hi[E]");
  ASSERT_EQ(Run({"--model", model, "--chat-template", "chatml", "--context", ctx}, &out, &err), 0);
  EXPECT_EQ(out, "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
}

TEST_F(ChatTemplateCommand, ErrorsAndUsage) {
  std::string ctx = Write("c.json", kContext);
  std::string out, err;
  EXPECT_EQ(Run({"--context", ctx}, &out, &err), 2);
  EXPECT_EQ(Run({"--template", "x.jinja"}, &out, &err), 2);
  EXPECT_EQ(Run({"--bogus"}, &out, &err), 2);
  EXPECT_EQ(Run({"--help"}, &out, &err), 0);
  EXPECT_NE(out.find("usage: tessera chat-template"), std::string::npos);
  EXPECT_EQ(Run({"--template", (dir_ / "missing.jinja").string(), "--context", ctx}, &out, &err),
            1);
  std::string bad = Write("bad.jinja", "line one\n{% include 'x' %}");
  EXPECT_EQ(Run({"--template", bad, "--context", ctx}, &out, &err), 1);
  EXPECT_NE(err.find("line 2"), std::string::npos) << err;
  std::string not_object = Write("arr.json", "[1, 2]");
  EXPECT_EQ(Run({"--chat-template", "chatml", "--context", not_object}, &out, &err), 1);
  EXPECT_EQ(Run({"--chat-template", "no-such-template", "--context", ctx}, &out, &err), 1);
}

}  // namespace
}  // namespace tessera::cli
