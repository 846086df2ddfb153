// The serving engine's parts, each against hand-derived expectations: U+FFFD substitution
// (the Unicode Standard's own example), stop strings across pieces, the block manager and
// the scheduler's admission, chunking and preemption order, request validation messages.
#include <memory>
#include <string>
#include <vector>

#include "controller/serving/block_manager.h"
#include "controller/serving/request_validation.h"
#include "controller/serving/scheduler.h"
#include "controller/serving/stop_matcher.h"
#include "controller/serving/utf8_sanitizer.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace tessera::serving {
namespace {

using ::testing::HasSubstr;

const std::string kFffd = "\xEF\xBF\xBD";

TEST(Utf8Sanitizer, UnicodeStandardTable3_8Example) {
  // Unicode Standard 15, section 3.9, Table 3-8: 61 F1 80 80 E1 80 C2 62 80 63 80 BF 64 ->
  // a FFFD FFFD FFFD b FFFD c FFFD FFFD d (one FFFD per maximal subpart).
  const std::string in = "\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64";
  const std::string want = "a" + kFffd + kFffd + kFffd + "b" + kFffd + "c" + kFffd + kFffd + "d";
  EXPECT_EQ(SanitizeUtf8(in), want);
  // Byte by byte, as tokens may deliver it.
  Utf8Sanitizer s;
  std::string out;
  for (char c : in) s.Append(std::string(1, c), &out);
  s.Finish(&out);
  EXPECT_EQ(out, want);
}

TEST(Utf8Sanitizer, OverlongSurrogateAndOutOfRangeFormsAreReplacedBytewise) {
  EXPECT_EQ(SanitizeUtf8("\xC0\xAF"), kFffd + kFffd);                          // overlong '/'
  EXPECT_EQ(SanitizeUtf8("\xE0\x80\x80"), kFffd + kFffd + kFffd);              // overlong NUL
  EXPECT_EQ(SanitizeUtf8("\xED\xA0\x80"), kFffd + kFffd + kFffd);              // surrogate D800
  EXPECT_EQ(SanitizeUtf8("\xF4\x90\x80\x80"), kFffd + kFffd + kFffd + kFffd);  // > 10FFFF
  EXPECT_EQ(SanitizeUtf8("\xFF"), kFffd);
  EXPECT_EQ(SanitizeUtf8("\xE2\x82"
                         "a"),
            kFffd + "a");  // € cut short
  EXPECT_EQ(SanitizeUtf8("\xE2\x82\xAC \xF0\x9F\x98\x80"), "\xE2\x82\xAC \xF0\x9F\x98\x80");
}

TEST(Utf8Sanitizer, StreamingHoldsBackAnUnfinishedCharacter) {
  Utf8Sanitizer s;
  std::string out;
  s.Append("x\xF0\x9F", &out);
  EXPECT_EQ(out, "x");
  EXPECT_TRUE(s.has_pending());
  s.Append("\x98", &out);
  EXPECT_EQ(out, "x");
  s.Append("\x80!", &out);
  EXPECT_EQ(out, "x\xF0\x9F\x98\x80!");
  s.Append("\xF0\x9F", &out);
  s.Finish(&out);  // never finished: one replacement for the maximal subpart
  EXPECT_EQ(out, "x\xF0\x9F\x98\x80!" + kFffd);
}

TEST(StopMatcher, StopsAcrossPiecesAndExcludesTheStopString) {
  StopMatcher m({"o w"});
  std::string out;
  EXPECT_FALSE(m.Append("Hel", &out));
  EXPECT_EQ(out, "Hel");
  EXPECT_TRUE(m.Append("lo wo", &out));
  EXPECT_EQ(out, "Hell");
  EXPECT_EQ(m.matched(), "o w");
  EXPECT_TRUE(m.Append("rld", &out));
  m.Flush(&out);
  EXPECT_EQ(out, "Hell");
}

TEST(StopMatcher, HoldsBackAPossibleStartUntilDecided) {
  StopMatcher m({"world"});
  std::string out;
  EXPECT_FALSE(m.Append("hello wor", &out));
  EXPECT_EQ(out, "hello ");  // "wor" may begin "world"
  EXPECT_TRUE(m.Append("ld!", &out));
  EXPECT_EQ(out, "hello ");

  StopMatcher n({"word"});
  out.clear();
  EXPECT_FALSE(n.Append("hello wor", &out));
  EXPECT_EQ(out, "hello ");
  EXPECT_FALSE(n.Append("ld", &out));
  EXPECT_EQ(out, "hello world");
  EXPECT_FALSE(n.Append("s wo", &out));
  n.Flush(&out);  // the end of the text releases what was held
  EXPECT_EQ(out, "hello worlds wo");
}

TEST(StopMatcher, EarliestStopWinsAndEmptyStopsAreIgnored) {
  StopMatcher m({"", "c", "ab"});
  std::string out;
  EXPECT_TRUE(m.Append("xxabc", &out));
  EXPECT_EQ(out, "xx");
  EXPECT_EQ(m.matched(), "ab");
}

TEST(BlockManager, ReservesAllOrNothingAndReleases) {
  BlockManager b(4, 16);
  EXPECT_EQ(b.capacity_tokens(), 64);
  std::vector<int32_t> t1, t2;
  EXPECT_TRUE(b.Reserve(t1, 17));
  EXPECT_EQ(t1, (std::vector<int32_t>{0, 1}));
  EXPECT_TRUE(b.Reserve(t1, 32));  // already covered
  EXPECT_EQ(t1.size(), 2u);
  EXPECT_FALSE(b.Reserve(t2, 48));  // needs 3, 2 free
  EXPECT_TRUE(t2.empty());
  EXPECT_EQ(b.used_blocks(), 2);
  EXPECT_DOUBLE_EQ(b.usage(), 0.5);
  EXPECT_TRUE(b.Reserve(t2, 1));
  EXPECT_EQ(b.free_blocks(), 1);
  b.Release(t1);
  EXPECT_TRUE(t1.empty());
  EXPECT_EQ(b.free_blocks(), 3);
  EXPECT_EQ(b.used_blocks(), 1);
  EXPECT_EQ(b.BlocksFor(0), 0);
  EXPECT_EQ(b.BlocksFor(16), 1);
  EXPECT_EQ(b.BlocksFor(17), 2);
}

std::unique_ptr<Sequence> Seq(int prompt) {
  auto s = std::make_unique<Sequence>();
  s->tokens.assign(prompt, 7);
  s->prompt_len = prompt;
  return s;
}

// Applies a plan as the engine does: computed tokens advance, sampling chunks add a token.
void Advance(const StepPlan& plan) {
  for (const ScheduledChunk& c : plan.chunks) {
    c.seq->num_computed += c.n_tokens;
    if (c.sample) c.seq->tokens.push_back(1);
  }
}

TEST(Scheduler, ChunksPromptsAdmitsFcfsAndPreemptsTheNewest) {
  BlockManager blocks(4, 4);  // 16 token slots
  Scheduler sched({/*max_num_seqs=*/8, /*max_num_batched_tokens=*/8}, &blocks);
  auto a_owned = Seq(10), b_owned = Seq(3);
  Sequence *a = a_owned.get(), *b = b_owned.get();
  sched.Enqueue(std::move(a_owned));
  sched.Enqueue(std::move(b_owned));

  // 1: A's first chunk takes the whole budget of 8; B waits.
  StepPlan p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(p.chunks[0].n_tokens, 8);
  EXPECT_FALSE(p.chunks[0].sample);
  EXPECT_EQ(blocks.used_blocks(), 2);
  Advance(p);

  // 2: A's last 2 prompt tokens (samples) and B's whole prompt share the step.
  p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(p.chunks[0].start, 8);
  EXPECT_EQ(p.chunks[0].n_tokens, 2);
  EXPECT_TRUE(p.chunks[0].sample);
  EXPECT_EQ(p.chunks[1].seq, b);
  EXPECT_EQ(p.chunks[1].n_tokens, 3);
  EXPECT_EQ(blocks.used_blocks(), 4);
  Advance(p);

  // 3: both decode (A at 11 tokens, B at 4: still 3 + 1 blocks).
  p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(p.decode_tokens, 2);
  Advance(p);

  // 4: B needs a 2nd block, none is free: B (the newest) is preempted, A runs alone.
  p = sched.Schedule();
  EXPECT_EQ(p.preempted, 1);
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(sched.preemptions(), 1);
  ASSERT_EQ(sched.waiting().size(), 1u);
  EXPECT_EQ(sched.waiting().front().get(), b);
  EXPECT_EQ(b->num_computed, 0);
  EXPECT_TRUE(b->block_table.empty());
  Advance(p);

  // 5: A takes the freed block for position 12; B's recompute (5 tokens = 2 blocks) waits.
  p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, a);
  EXPECT_EQ(blocks.used_blocks(), 4);

  // A finishes: B comes back with prompt + generated token as its prefill.
  sched.Remove(a);
  EXPECT_EQ(blocks.used_blocks(), 0);
  p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.chunks[0].seq, b);
  EXPECT_EQ(p.chunks[0].start, 0);
  EXPECT_EQ(p.chunks[0].n_tokens, 5);
  EXPECT_TRUE(p.chunks[0].sample);
}

TEST(Scheduler, ASequenceThatOutgrowsTheWholeCacheIsReported) {
  BlockManager blocks(2, 4);
  Scheduler sched({8, 8}, &blocks);
  auto owned = Seq(8);
  Sequence* s = owned.get();
  sched.Enqueue(std::move(owned));
  StepPlan p = sched.Schedule();
  ASSERT_EQ(p.chunks.size(), 1u);
  EXPECT_EQ(p.cannot_fit, nullptr);
  Advance(p);  // 9 tokens now: a third block that does not exist
  p = sched.Schedule();
  EXPECT_TRUE(p.chunks.empty());
  EXPECT_EQ(p.cannot_fit, s);
  EXPECT_EQ(blocks.used_blocks(), 0);
}

TEST(Scheduler, RespectsMaxNumSeqs) {
  BlockManager blocks(16, 4);
  Scheduler sched({/*max_num_seqs=*/2, /*max_num_batched_tokens=*/64}, &blocks);
  for (int i = 0; i < 3; ++i) sched.Enqueue(Seq(2));
  StepPlan p = sched.Schedule();
  EXPECT_EQ(p.chunks.size(), 2u);
  EXPECT_EQ(sched.waiting().size(), 1u);
}

RequestLimits Limits() {
  RequestLimits l;
  l.max_prompt_tokens = 10;
  l.max_model_len = 16;
  l.n_vocab = 100;
  return l;
}

GenerateRequest Req(int prompt, int max_tokens) {
  GenerateRequest r;
  r.prompt_tokens.assign(prompt, 5);
  r.max_tokens = max_tokens;
  return r;
}

TEST(RequestValidation, LimitsAreNamedWithTheNumbers) {
  auto too_long = ValidateRequest(Req(11, 1), Limits());
  ASSERT_EQ(too_long.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(too_long.status().message(), HasSubstr("max-prompt-tokens"));
  EXPECT_THAT(too_long.status().message(), HasSubstr("11 tokens"));

  auto total = ValidateRequest(Req(10, 7), Limits());
  ASSERT_EQ(total.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(total.status().message(),
              HasSubstr("maximum context length (max-model-len) is 16 tokens. However, you "
                        "requested 17 tokens (10 in the prompt, 7 in the completion)"));

  EXPECT_EQ(ValidateRequest(Req(0, 1), Limits()).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(*ValidateRequest(Req(10, 6), Limits()), 6);
  EXPECT_EQ(*ValidateRequest(Req(10, 0), Limits()), 6);  // the room left
  RequestLimits with_default = Limits();
  with_default.default_max_tokens = 4;
  EXPECT_EQ(*ValidateRequest(Req(3, 0), with_default), 4);
  EXPECT_EQ(*ValidateRequest(Req(10, 0), with_default), 4);

  GenerateRequest bad_id = Req(3, 1);
  bad_id.prompt_tokens[1] = 100;
  EXPECT_THAT(ValidateRequest(bad_id, Limits()).status().message(), HasSubstr("vocabulary"));
}

TEST(RequestValidation, SamplingRangesAsTheWorkerSampler) {
  auto check = [](auto set) {
    GenerateRequest r = Req(2, 1);
    set(r);
    return ValidateRequest(r, Limits()).status();
  };
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.temperature = -0.1f; }).message(),
              HasSubstr("temperature"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.top_p = 0; }).message(),
              HasSubstr("top_p"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.top_k = -2; }).message(),
              HasSubstr("top_k"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.min_p = 1.5f; }).message(),
              HasSubstr("min_p"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.repetition_penalty = 0; }).message(),
              HasSubstr("repetition_penalty"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.presence_penalty = 2.5f; }).message(),
              HasSubstr("presence_penalty"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.sampling.frequency_penalty = -3; }).message(),
              HasSubstr("frequency_penalty"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.top_logprobs = 21; }).message(),
              HasSubstr("top_logprobs"));
  EXPECT_THAT(check([](GenerateRequest& r) { r.max_tokens = -1; }).message(),
              HasSubstr("max_tokens"));
  EXPECT_TRUE(check([](GenerateRequest& r) { r.sampling.temperature = 0; }).ok());
}

}  // namespace
}  // namespace tessera::serving
