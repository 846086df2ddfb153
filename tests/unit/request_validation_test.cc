// controller/serving/request_validation.h: the checks the REST gateway, the gRPC service and
// `tessera generate` share. Boundaries are the documented ones (OpenAI's ranges for sampling,
// the limits in the header), written out here by hand.
#include "controller/serving/request_validation.h"

#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::serving {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::Status WithSampling(void (*set)(Sampling&)) {
  Sampling s;
  set(s);
  return ValidateSampling(s);
}

TEST(RequestValidationTest, SamplingBoundariesAreInclusiveWhereDocumented) {
  EXPECT_TRUE(ValidateSampling(Sampling()).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.temperature = 0; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.temperature = 2; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.top_p = 1; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.min_p = 1; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.top_k = -1; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.repetition_penalty = 10; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.presence_penalty = -2; }).ok());
  EXPECT_TRUE(WithSampling([](Sampling& s) { s.frequency_penalty = 2; }).ok());
}

TEST(RequestValidationTest, SamplingErrorsNameParameterRangeAndValue) {
  struct Case {
    void (*set)(Sampling&);
    const char* field;
    const char* range;
    const char* value;
  };
  const Case cases[] = {
      {[](Sampling& s) { s.temperature = 2.5f; }, "temperature", "[0, 2]", "2.5"},
      {[](Sampling& s) { s.temperature = -1; }, "temperature", "[0, 2]", "-1"},
      {[](Sampling& s) { s.temperature = NAN; }, "temperature", "[0, 2]", "nan"},
      {[](Sampling& s) { s.top_k = -2; }, "top_k", ">= -1", "-2"},
      {[](Sampling& s) { s.top_p = 0; }, "top_p", "(0, 1]", "0"},
      {[](Sampling& s) { s.min_p = 1.5f; }, "min_p", "[0, 1]", "1.5"},
      {[](Sampling& s) { s.repetition_penalty = 0; }, "repetition_penalty", "(0, 10]", "0"},
      {[](Sampling& s) { s.repetition_penalty = 11; }, "repetition_penalty", "(0, 10]", "11"},
      {[](Sampling& s) { s.presence_penalty = 2.5f; }, "presence_penalty", "[-2, 2]", "2.5"},
      {[](Sampling& s) { s.frequency_penalty = -3; }, "frequency_penalty", "[-2, 2]", "-3"},
  };
  for (const Case& c : cases) {
    const absl::Status s = WithSampling(c.set);
    ASSERT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << c.field;
    EXPECT_EQ(FieldOf(s), c.field);
    EXPECT_THAT(s.message(), HasSubstr(std::string(c.field) + ": expected"));
    EXPECT_THAT(s.message(), HasSubstr(c.range)) << s.message();
    EXPECT_THAT(s.message(), HasSubstr(std::string("got ") + c.value)) << s.message();
  }
}

TEST(RequestValidationTest, RequestIdIsShortPrintableAscii) {
  EXPECT_TRUE(ValidateRequestId("").ok());
  EXPECT_TRUE(ValidateRequestId("req-1_a.b:c/d").ok());
  EXPECT_TRUE(ValidateRequestId(std::string(256, 'a')).ok());
  const absl::Status long_id = ValidateRequestId(std::string(1 << 20, 'a'));
  EXPECT_EQ(long_id.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldOf(long_id), "request_id");
  EXPECT_THAT(long_id.message(), HasSubstr("at most 256 bytes, got 1048576"));
  EXPECT_FALSE(ValidateRequestId(std::string(257, 'a')).ok());
  for (const char* bad : {"a b", "a\nb", "a\x7f", "caf\xC3\xA9"}) {
    const absl::Status s = ValidateRequestId(bad);
    EXPECT_EQ(FieldOf(s), "request_id") << bad;
    EXPECT_THAT(s.message(), HasSubstr("printable ASCII")) << bad;
  }
  EXPECT_THAT(ValidateRequestId("a\nb").message(), HasSubstr("byte 1 is 0x0a"));
}

TEST(RequestValidationTest, ModelNameIsBounded) {
  EXPECT_TRUE(ValidateModelName("").ok());
  EXPECT_TRUE(ValidateModelName("GLM-5 Q4/ünïcode").ok());
  EXPECT_TRUE(ValidateModelName(std::string(256, 'm')).ok());
  const absl::Status s = ValidateModelName(std::string(257, 'm'));
  EXPECT_EQ(FieldOf(s), "model");
  EXPECT_THAT(s.message(), HasSubstr("at most 256 bytes, got 257"));
  EXPECT_EQ(FieldOf(ValidateModelName("a\tb")), "model");
}

TEST(RequestValidationTest, StopStringsAreCountedAndBounded) {
  EXPECT_TRUE(ValidateStopStrings(std::vector<std::string>(16, "x")).ok());
  EXPECT_TRUE(ValidateStopStrings({"", std::string(256, 's')}).ok());
  const absl::Status many = ValidateStopStrings(std::vector<std::string>(17, "x"));
  EXPECT_EQ(FieldOf(many), "stop");
  EXPECT_THAT(many.message(), HasSubstr("at most 16 stop strings, got 17"));
  const absl::Status long_one = ValidateStopStrings({"a", "b", "c", std::string(257, 's')});
  EXPECT_EQ(FieldOf(long_one), "stop[3]");
  EXPECT_THAT(long_one.message(), HasSubstr("stop[3]: expected at most 256 bytes, got 257"));
}

TEST(RequestValidationTest, ChatRolesAreOpenAisAndErrorsQuoteAShortPrefix) {
  for (const char* role : {"system", "developer", "user", "assistant", "tool", "function"}) {
    EXPECT_TRUE(ValidateChatRole(role, "messages[0].role").ok()) << role;
  }
  const absl::Status wizard = ValidateChatRole("wizard", "messages[2].role");
  EXPECT_EQ(wizard.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FieldOf(wizard), "messages[2].role");
  EXPECT_THAT(wizard.message(), HasSubstr("messages[2].role: expected system"));
  EXPECT_THAT(wizard.message(), HasSubstr("'wizard'"));
  EXPECT_FALSE(ValidateChatRole("", "r").ok());
  EXPECT_FALSE(ValidateChatRole("User", "r").ok());
  // A huge role is not echoed: at most 32 bytes of it, control characters shown as '?'.
  const absl::Status huge = ValidateChatRole(std::string(1 << 20, 'w'), "r");
  EXPECT_LT(huge.message().size(), 200u);
  EXPECT_THAT(huge.message(), HasSubstr(absl::StrCat("'", std::string(32, 'w'), "...'")));
  EXPECT_THAT(ValidateChatRole("a\nb", "r").message(), HasSubstr("'a?b'"));
  // A cut never splits a UTF-8 character: 31 ASCII bytes then a 2-byte character.
  const absl::Status cut = ValidateChatRole(std::string(31, 'x') + "\xC3\xA9yyyy", "r");
  EXPECT_THAT(cut.message(), HasSubstr(absl::StrCat("'", std::string(31, 'x'), "...'")));

  EXPECT_EQ(FieldOf(ValidateChatMessages({})), "messages");
  EXPECT_EQ(FieldOf(ValidateChatMessages({{"user", "hi"}, {"wizard", "x"}})), "messages[1].role");
  EXPECT_TRUE(ValidateChatMessages({{"system", ""}, {"user", "hi"}}).ok());
}

TEST(RequestValidationTest, AuthorizationIsOneBearerValueWithTheExactKey) {
  using V = std::vector<absl::string_view>;
  EXPECT_TRUE(AuthorizationAllows(V{"Bearer k3y"}, "k3y"));
  EXPECT_TRUE(AuthorizationAllows(V{"bearer k3y"}, "k3y"));
  EXPECT_TRUE(AuthorizationAllows(V{"BEARER k3y"}, "k3y"));
  for (const char* bad : {"Bearer  k3y", "Bearer k3y ", " Bearer k3y", "Bearer\tk3y", "Bearer k3",
                          "Bearer k3yy", "Bearer ", "Bearer", "Basic k3y", "k3y", ""}) {
    EXPECT_FALSE(AuthorizationAllows(V{bad}, "k3y")) << "'" << bad << "'";
  }
  EXPECT_FALSE(AuthorizationAllows(V{}, "k3y"));
  EXPECT_FALSE(AuthorizationAllows(V{"Bearer k3y", "Bearer k3y"}, "k3y"));
  EXPECT_FALSE(AuthorizationAllows(V{"Bearer k3y", "Bearer other"}, "k3y"));
  // No key configured: everything passes.
  EXPECT_TRUE(AuthorizationAllows(V{}, ""));
  EXPECT_TRUE(AuthorizationAllows(V{"Bearer x", "Bearer y"}, ""));
}

TEST(RequestValidationTest, OptionsNameTheVocabularyAndTheIndex) {
  GenerateRequest r;
  r.stop_token_ids = {5, -1};
  absl::Status s = ValidateRequestOptions(r, 258);
  EXPECT_EQ(FieldOf(s), "stop_token_ids[1]");
  EXPECT_THAT(s.message(), HasSubstr("token id -1 is outside the vocabulary [0, 258)"));
  r.stop_token_ids = {258};
  EXPECT_THAT(ValidateRequestOptions(r, 258).message(), HasSubstr("[0, 258)"));
  r.stop_token_ids = {-3};
  s = ValidateRequestOptions(r, 0);  // vocabulary unknown
  EXPECT_THAT(s.message(), HasSubstr("stop_token_ids[0]: expected a token id >= 0, got -3"));
  EXPECT_THAT(s.message(), Not(HasSubstr("[0, 0)")));
  r.stop_token_ids = {1000000};
  EXPECT_TRUE(ValidateRequestOptions(r, 0).ok());

  GenerateRequest top;
  top.top_logprobs = 21;
  EXPECT_EQ(FieldOf(ValidateRequestOptions(top, 0)), "top_logprobs");
  GenerateRequest id;
  id.request_id = std::string(300, 'i');
  EXPECT_EQ(FieldOf(ValidateRequestOptions(id, 0)), "request_id");
}

}  // namespace
}  // namespace tessera::serving
