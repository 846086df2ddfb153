// Token sampling for one sequence: penalties, greedy, top-k, top-p, min-p, temperature, a
// per-request seeded draw, log-probabilities and end-of-generation detection.
//
//   absl::StatusOr<Sampler> sampler = Sampler::Create(params);    // per sequence
//   sampler->AddPromptTokens(prompt);          // once, before the first Sample
//   for (;;) {
//     SampleResult r = sampler->Sample(logits_of_last_position);  // records r.token
//     if (r.end_of_generation) break;
//   }
//
// Order of operations, llama.cpp's default chain: penalties -> greedy when temperature is
// 0 -> top-k -> top-p -> min-p -> temperature -> softmax -> draw. Top-p and min-p therefore
// judge the distribution at temperature 1 (vLLM applies temperature first), renormalized
// over what top-k left, as both projects do. Greedy ignores the truncation steps (they
// always keep the argmax).
//
// Determinism: each non-greedy step takes one output x of std::mt19937_64 (fixed by the C++
// standard), u = (x >> 11) * 2^-53, and picks the first surviving token whose running sum
// of weights exp((logit - max) * (1 / temperature)) exceeds u times their total. Survivors run
// in token-id order, except after top-k, where they run best first (highest logit, then
// lowest id). The exponential is the library's own polynomial (vocab_math.h), not the platform's
// libm, so the same seed and logits give the same tokens on every platform.
#pragma once

#include <cstdint>
#include <optional>
#include <random>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "worker/sampling/ranking.h"

namespace tessera::sampling {

// Which distribution SampleResult's log-probabilities describe.
enum class LogprobsMode {
  // log-softmax of the model's logits as given to Sample (before penalties, truncation and
  // temperature): the model's own belief. vLLM's default ("raw_logprobs"), and what
  // OpenAI's API reports.
  kRaw,
  // log-softmax of the distribution the token was drawn from: after penalties, top-k,
  // top-p, min-p and temperature; truncated tokens are -inf and are never listed as
  // alternatives. Greedy uses temperature 1 here. vLLM's "processed_logprobs".
  kProcessed,
};

struct SamplingParams {
  // 0 selects greedy decoding (argmax; ties go to the lowest token id), and so does any
  // value below 1e-5 (as in vLLM). Must be >= 0.
  float temperature = 1.0f;
  // Keep only the k most likely tokens; 0 or -1 turns it off. Must be >= -1.
  int32_t top_k = 0;
  // Keep the smallest set of most likely tokens whose probability sums to >= top_p.
  // In (0, 1]; 1 turns it off.
  float top_p = 1.0f;
  // Drop tokens whose probability is below min_p times the most likely token's. In [0, 1];
  // 0 turns it off.
  float min_p = 0.0f;
  // CTRL / llama.cpp / vLLM: every token seen in the prompt or the output has its logit
  // divided by the penalty when positive, multiplied by it when negative. > 0; 1 is off.
  float repetition_penalty = 1.0f;
  // OpenAI: logit -= presence_penalty * (count > 0) + frequency_penalty * count, where
  // count is how often the token was generated so far (the prompt does not count).
  // Each in [-2, 2]; 0 is off.
  float presence_penalty = 0.0f;
  float frequency_penalty = 0.0f;
  // Seed of the sampler's random generator; absent: a nondeterministic seed (readable
  // afterwards through Sampler::seed()).
  std::optional<uint64_t> seed;
  // How many most likely alternatives SampleResult::top_logprobs lists, 0..20.
  int32_t top_logprobs = 0;
  LogprobsMode logprobs_mode = LogprobsMode::kRaw;
  // Tokens that end generation (the model's EOS / EOT ids plus the request's stop ids);
  // the caller merges them. Each must be >= 0.
  std::vector<int32_t> stop_token_ids;

  // OK, or InvalidArgument naming the first parameter out of range, its allowed range and
  // the value given (NaN is out of every range).
  absl::Status Validate() const;
};

struct TokenLogprob {
  int32_t token = -1;
  float logprob = 0.0f;

  friend bool operator==(const TokenLogprob&, const TokenLogprob&) = default;
};

struct SampleResult {
  int32_t token = -1;
  // Log-probability of `token` in the distribution LogprobsMode selects.
  float logprob = 0.0f;
  // The SamplingParams::top_logprobs most likely tokens of that distribution, most likely
  // first (ties: lowest id first); the chosen token appears only if it is among them.
  // Shorter when fewer tokens have a nonzero probability (kProcessed) or the vocabulary
  // is smaller.
  std::vector<TokenLogprob> top_logprobs;
  // `token` is one of SamplingParams::stop_token_ids.
  bool end_of_generation = false;
};

// What a device sampler needs to take a sequence's next token the way Sample would (the GPU's
// cuda::Sample runs the same chain: greedy, top-k, top-p, min-p, temperature, one draw).
struct DeviceDraw {
  float temperature = 1.0f;
  int32_t top_k = 0;
  float top_p = 1.0f;
  float min_p = 0.0f;
  double uniform = 0.0;  // the u Sample would draw next (0 when greedy: no draw)
};

// One per sequence: it holds the sequence's random generator and token history. Movable,
// not thread-safe; a step allocates nothing once its buffers have grown to the vocabulary.
class Sampler {
 public:
  // InvalidArgument when params.Validate() fails.
  static absl::StatusOr<Sampler> Create(SamplingParams params);

  Sampler(Sampler&&) = default;
  Sampler& operator=(Sampler&&) = default;

  // Records the prompt for the repetition penalty. Call before the first Sample (calling
  // it later adds the tokens as prompt tokens all the same). Negative ids are ignored.
  void AddPromptTokens(absl::Span<const int32_t> tokens);
  // Records a token generated without Sample (a forced or externally chosen token) for the
  // penalties. Sample records its own choice: do not pass that token here again.
  void AcceptGeneratedToken(int32_t token);

  // Chooses the next token from `logits` (one value per vocabulary entry) and records it
  // as generated. NaN logits count as -inf, +inf as the largest float. History tokens at
  // or beyond logits.size() are ignored. Empty `logits` gives token -1 and a NaN logprob.
  //
  // `allowed`, when not empty, is a token mask (bit id of allowed[id / 64]; ids past its
  // end are not allowed): the other tokens get -inf after the penalties, so that neither
  // greedy nor a draw can pick them (structured output). The caller allows at least one
  // token with a finite logit. Raw log-probabilities still describe the model's own,
  // unmasked distribution; processed ones the masked one.
  SampleResult Sample(absl::Span<const float> logits, absl::Span<const uint64_t> allowed = {});

  // Sampling on a device (the GPU executor's logits never leave it): the parameters and the
  // next draw, without advancing the generator; nullopt when the next token needs the host
  // (penalties on, processed log-probabilities or alternatives asked). Tokens a device draws
  // with the same u can differ from Sample's where they differ in order (after top-k the
  // host walks survivors best first, the device by id) or in exp rounding: the same
  // distribution, not the same bits.
  std::optional<DeviceDraw> NextDeviceDraw() const;
  // Records the token a device chose with NextDeviceDraw()'s draw: the generator advances as
  // Sample's would have, and the result is Sample's (the raw log-probability as given, no
  // alternatives, end_of_generation for a stop id).
  SampleResult AcceptDeviceSample(int32_t token, float logprob);

  const SamplingParams& params() const { return params_; }
  // The seed in use (params().seed, or the one drawn when it was absent).
  uint64_t seed() const { return seed_; }

 private:
  Sampler(SamplingParams params, uint64_t seed);

  bool PenaltiesActive() const;
  void ApplyPenalties(std::vector<float>& logits) const;
  // The truncation steps. The survivors are every entry of logits_ while dense_ is true,
  // else the entries of candidates_.
  void TopK(int32_t k);
  void TopP(float p);
  void MinP(float min_p);
  float MaxSurvivorLogit() const;
  int32_t BestSurvivor() const;
  // Writes exp((logit - max_logit) * (1 / temperature)) of every survivor to weights_ (in
  // survivor order) and returns their sum.
  double Weigh(float max_logit, float temperature);
  // Draws a survivor with probability proportional to its weight.
  int32_t Draw(double total);
  void ProcessedLogprobs(float max_logit, float temperature, double total, int32_t token,
                         SampleResult& result);
  void RawLogprobs(absl::Span<const float> raw, int32_t token, SampleResult& result);
  // Sets the logits of the tokens `allowed` does not allow to -inf.
  void ApplyMask(absl::Span<const uint64_t> allowed);

  SamplingParams params_;
  uint64_t seed_;
  std::mt19937_64 rng_;
  // Tokens of the prompt or the output (repetition penalty), and token -> times generated
  // (presence / frequency penalties). Left empty when the penalties are off.
  absl::flat_hash_set<int32_t> seen_;
  absl::flat_hash_map<int32_t, int32_t> generated_counts_;

  // Scratch reused across calls so that a step allocates nothing once warm.
  std::vector<float> logits_;
  std::vector<internal::Candidate> candidates_;
  std::vector<internal::Candidate> scratch_;
  std::vector<float> weights_;
  std::vector<double> block_sums_;  // Sums of weights_ per kDrawBlock survivors.
  bool dense_ = true;
  // logits_ differs from the sanitized model logits (penalties or a mask applied).
  bool modified_ = false;
  // candidates_ is in best-first order (highest logit, then lowest id).
  bool sorted_ = false;
};

}  // namespace tessera::sampling
