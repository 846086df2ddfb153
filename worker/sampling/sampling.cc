#include "worker/sampling/sampling.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "worker/sampling/vocab_math.h"

namespace tessera::sampling {
namespace {

using internal::Better;
using internal::Candidate;
using internal::SelectBest;
using internal::SelectBestDense;

constexpr int32_t kMaxTopLogprobs = 20;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kMinTemperature = 1e-5f;
// Tokens per partial sum in the draw (see Weigh).
constexpr size_t kDrawBlock = 256;

absl::Status OutOfRange(const char* name, const std::string& range, double value) {
  return absl::InvalidArgumentError(
      absl::StrCat("sampling parameter ", name, ": expected ", range, ", got ", value));
}

}  // namespace

absl::Status SamplingParams::Validate() const {
  // Written as !(in range) so that NaN fails every check.
  if (!(temperature >= 0 && std::isfinite(temperature))) {
    return OutOfRange("temperature", "a finite value >= 0 (0 = greedy)", temperature);
  }
  if (top_k < -1) return OutOfRange("top_k", "a value >= -1 (0 or -1 = off)", top_k);
  if (!(top_p > 0 && top_p <= 1)) return OutOfRange("top_p", "a value in (0, 1]", top_p);
  if (!(min_p >= 0 && min_p <= 1)) return OutOfRange("min_p", "a value in [0, 1]", min_p);
  if (!(repetition_penalty > 0 && std::isfinite(repetition_penalty))) {
    return OutOfRange("repetition_penalty", "a finite value > 0 (1 = off)", repetition_penalty);
  }
  if (!(presence_penalty >= -2 && presence_penalty <= 2)) {
    return OutOfRange("presence_penalty", "a value in [-2, 2]", presence_penalty);
  }
  if (!(frequency_penalty >= -2 && frequency_penalty <= 2)) {
    return OutOfRange("frequency_penalty", "a value in [-2, 2]", frequency_penalty);
  }
  if (top_logprobs < 0 || top_logprobs > kMaxTopLogprobs) {
    return OutOfRange("top_logprobs", absl::StrCat("a value in [0, ", kMaxTopLogprobs, "]"),
                      top_logprobs);
  }
  for (int32_t id : stop_token_ids) {
    if (id < 0) return OutOfRange("stop_token_ids", "token ids >= 0", id);
  }
  return absl::OkStatus();
}

absl::StatusOr<Sampler> Sampler::Create(SamplingParams params) {
  if (absl::Status status = params.Validate(); !status.ok()) return status;
  uint64_t seed;
  if (params.seed.has_value()) {
    seed = *params.seed;
  } else {
    std::random_device device;
    seed = (static_cast<uint64_t>(device()) << 32) ^ device();
  }
  return Sampler(std::move(params), seed);
}

Sampler::Sampler(SamplingParams params, uint64_t seed)
    : params_(std::move(params)), seed_(seed), rng_(seed) {}

bool Sampler::PenaltiesActive() const {
  return params_.repetition_penalty != 1.0f || params_.presence_penalty != 0.0f ||
         params_.frequency_penalty != 0.0f;
}

void Sampler::AddPromptTokens(absl::Span<const int32_t> tokens) {
  if (!PenaltiesActive()) return;
  for (int32_t token : tokens) {
    if (token >= 0) seen_.insert(token);
  }
}

void Sampler::AcceptGeneratedToken(int32_t token) {
  if (!PenaltiesActive() || token < 0) return;
  seen_.insert(token);
  ++generated_counts_[token];
}

void Sampler::ApplyPenalties(std::vector<float>& logits) const {
  const size_t n = logits.size();
  const float repetition = params_.repetition_penalty;
  if (repetition != 1.0f) {
    // CTRL (Keskar et al. 2019) as llama.cpp and vLLM apply it: shrink toward zero from
    // either side.
    for (int32_t token : seen_) {
      if (static_cast<size_t>(token) >= n) continue;
      float& l = logits[token];
      l = l > 0 ? l / repetition : l * repetition;
    }
  }
  if (params_.presence_penalty != 0.0f || params_.frequency_penalty != 0.0f) {
    // OpenAI's definition (API reference, "frequency and presence penalties").
    for (const auto& [token, count] : generated_counts_) {
      if (static_cast<size_t>(token) >= n) continue;
      logits[token] -=
          params_.frequency_penalty * static_cast<float>(count) + params_.presence_penalty;
    }
  }
}

void Sampler::TopK(int32_t k) {
  const size_t n = logits_.size();
  if (k <= 0 || static_cast<size_t>(k) >= n) return;
  const size_t kk = static_cast<size_t>(k);
  if (kk * 16 <= n) {
    SelectBestDense(logits_, kk, candidates_);
  } else {
    candidates_.resize(n);
    for (size_t i = 0; i < n; ++i) candidates_[i] = {logits_[i], static_cast<int32_t>(i)};
    std::nth_element(candidates_.begin(), candidates_.begin() + k, candidates_.end(), Better);
    candidates_.resize(kk);
    std::sort(candidates_.begin(), candidates_.end(), Better);
  }
  dense_ = false;
  sorted_ = true;
}

void Sampler::TopP(float p) {
  if (p >= 1.0f) return;
  if (sorted_) {
    // After top-k: walk the (few) survivors best first.
    const size_t m = candidates_.size();
    weights_.resize(m);
    const float max = candidates_[0].logit;
    for (size_t j = 0; j < m; ++j) weights_[j] = FastExp(candidates_[j].logit - max);
    const double target = p * SumInOrder(weights_.data(), m);
    double cum = 0;
    size_t keep = 0;
    while (keep < m && cum < target) cum += weights_[keep++];
    candidates_.resize(std::max<size_t>(keep, 1));
    return;
  }
  // The whole vocabulary (no top-k before).
  const size_t n = logits_.size();
  const float max = MaxOf(logits_.data(), n);
  if (max == -kInf) return;  // Every logit -inf: nothing to rank.
  weights_.resize(n);
  ExpShifted(logits_.data(), n, max, 1.0f, weights_.data());
  const double target = p * SumInOrder(weights_.data(), n);
  internal::TopPOverVocabulary(logits_, weights_, target, candidates_, scratch_);
  dense_ = false;
  sorted_ = false;
}

void Sampler::MinP(float min_p) {
  if (min_p <= 0.0f) return;
  // p_i >= min_p * p_max  <=>  exp(l_i - l_max) >= min_p; the same exp everywhere keeps
  // the cut identical across platforms (a libm log would not).
  const float max = MaxSurvivorLogit();
  if (max == -kInf) return;
  if (dense_) {
    const size_t n = logits_.size();
    weights_.resize(n);
    ExpShifted(logits_.data(), n, max, 1.0f, weights_.data());
    candidates_.clear();
    for (size_t i = 0; i < n; ++i) {
      if (weights_[i] >= min_p) candidates_.push_back({logits_[i], static_cast<int32_t>(i)});
    }
    dense_ = false;
    return;
  }
  std::erase_if(candidates_,
                [&](const Candidate& c) { return !(FastExp(c.logit - max) >= min_p); });
}

float Sampler::MaxSurvivorLogit() const {
  if (dense_) return MaxOf(logits_.data(), logits_.size());
  if (sorted_) return candidates_[0].logit;
  float max = -kInf;
  for (const Candidate& c : candidates_) max = std::max(max, c.logit);
  return max;
}

int32_t Sampler::BestSurvivor() const {
  if (dense_) {
    // The first maximum: the lowest id on ties.
    const float max = MaxOf(logits_.data(), logits_.size());
    return static_cast<int32_t>(std::find(logits_.begin(), logits_.end(), max) - logits_.begin());
  }
  if (sorted_) return candidates_[0].id;
  return std::min_element(candidates_.begin(), candidates_.end(), Better)->id;
}

double Sampler::Weigh(float max_logit, float temperature) {
  const size_t m = dense_ ? logits_.size() : candidates_.size();
  weights_.resize(m);
  if (max_logit == -kInf) {
    // Every survivor is -inf: treat them as equally likely.
    std::fill(weights_.begin(), weights_.end(), 1.0f);
  } else if (dense_) {
    ExpShifted(logits_.data(), m, max_logit, 1.0f / temperature, weights_.data());
  } else {
    for (size_t j = 0; j < m; ++j) {
      weights_[j] = FastExp((candidates_[j].logit - max_logit) * (1.0f / temperature));
    }
  }
  // Per-block sums let the draw skip whole blocks instead of adding 150k weights one by
  // one.
  block_sums_.resize((m + kDrawBlock - 1) / kDrawBlock);
  double total = 0;
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    const size_t begin = b * kDrawBlock;
    block_sums_[b] = SumInOrder(weights_.data() + begin, std::min(kDrawBlock, m - begin));
    total += block_sums_[b];
  }
  return total;
}

int32_t Sampler::Draw(double total) {
  // 53 random bits -> a double uniform in [0, 1), exactly as every platform computes it.
  const double u = static_cast<double>(rng_() >> 11) * 0x1.0p-53;
  const double target = u * total;
  const size_t m = weights_.size();
  auto id_at = [&](size_t j) { return dense_ ? static_cast<int32_t>(j) : candidates_[j].id; };
  double cum = 0;
  for (size_t b = 0; b < block_sums_.size(); ++b) {
    if (target < cum + block_sums_[b]) {
      const size_t end = std::min(m, (b + 1) * kDrawBlock);
      double running = cum;
      for (size_t j = b * kDrawBlock; j < end; ++j) {
        running += weights_[j];
        if (target < running) return id_at(j);
      }
      // The one-by-one sum rounded just below the block's: go on with the next block.
    }
    cum += block_sums_[b];
  }
  // Rounding left the running sum just short of `total`: the last token that can occur.
  for (size_t j = m; j-- > 0;) {
    if (weights_[j] > 0) return id_at(j);
  }
  return id_at(0);
}

void Sampler::ProcessedLogprobs(float max_logit, float temperature, double total, int32_t token,
                                SampleResult& result) {
  const double log_total = std::log(total);
  auto logprob = [&](float logit) {
    return static_cast<float>((static_cast<double>(logit) - max_logit) / temperature - log_total);
  };
  result.logprob = logprob(logits_[token]);
  const size_t n = static_cast<size_t>(params_.top_logprobs);
  if (n == 0) return;
  if (dense_) {
    SelectBestDense(logits_, n, scratch_);
  } else {
    SelectBest(candidates_, n, scratch_);
  }
  for (const Candidate& c : scratch_) result.top_logprobs.push_back({c.id, logprob(c.logit)});
}

void Sampler::RawLogprobs(absl::Span<const float> raw, int32_t token, SampleResult& result) {
  // logits_ is free again: unless it still holds them, it takes the sanitized raw logits.
  const size_t n = raw.size();
  if (modified_) SanitizeInto(raw.data(), n, logits_.data());
  const float max = MaxOf(logits_.data(), n);
  const double log_total = std::log(SumExpShifted(logits_.data(), n, max));
  auto logprob = [&](float logit) {
    return static_cast<float>(static_cast<double>(logit) - max - log_total);
  };
  result.logprob = logprob(logits_[token]);
  SelectBestDense(absl::MakeConstSpan(logits_.data(), n), static_cast<size_t>(params_.top_logprobs),
                  scratch_);
  for (const Candidate& c : scratch_) result.top_logprobs.push_back({c.id, logprob(c.logit)});
}

void Sampler::ApplyMask(absl::Span<const uint64_t> allowed) {
  const size_t n = logits_.size();
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Masks are mostly whole words of zeros (structure) or of ones (inside strings): those
  // cost a fill or nothing; mixed words take a branch-free select per id.
  float* logits = logits_.data();
  for (size_t w = 0; w * 64 < n; ++w) {
    const uint64_t bits = w < allowed.size() ? allowed[w] : 0;
    const size_t begin = w * 64;
    const size_t count = std::min<size_t>(64, n - begin);
    if (bits == ~uint64_t{0}) continue;
    if (bits == 0) {
      std::fill_n(logits + begin, count, kNegInf);
      continue;
    }
    for (size_t j = 0; j < count; ++j) {
      logits[begin + j] = ((bits >> j) & 1) != 0 ? logits[begin + j] : kNegInf;
    }
  }
}

std::optional<DeviceDraw> Sampler::NextDeviceDraw() const {
  if (PenaltiesActive() || params_.logprobs_mode == LogprobsMode::kProcessed ||
      params_.top_logprobs > 0) {
    return std::nullopt;
  }
  DeviceDraw d;
  d.temperature = params_.temperature;
  d.top_k = params_.top_k;
  d.top_p = params_.top_p;
  d.min_p = params_.min_p;
  if (params_.temperature >= kMinTemperature) {
    std::mt19937_64 next = rng_;  // Draw's u, without taking it
    d.uniform = static_cast<double>(next() >> 11) * 0x1.0p-53;
  } else {
    d.temperature = 0.0f;
  }
  return d;
}

SampleResult Sampler::AcceptDeviceSample(int32_t token, float logprob) {
  if (params_.temperature >= kMinTemperature) rng_();  // the draw NextDeviceDraw showed
  SampleResult result;
  result.token = token;
  result.logprob = logprob;
  result.end_of_generation = std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(),
                                       token) != params_.stop_token_ids.end();
  AcceptGeneratedToken(token);
  return result;
}

SampleResult Sampler::Sample(absl::Span<const float> logits, absl::Span<const uint64_t> allowed) {
  SampleResult result;
  if (logits.empty()) {
    result.logprob = std::numeric_limits<float>::quiet_NaN();
    return result;
  }
  const size_t n = logits.size();
  logits_.resize(n);
  SanitizeInto(logits.data(), n, logits_.data());
  modified_ = PenaltiesActive() || !allowed.empty();
  if (PenaltiesActive()) ApplyPenalties(logits_);
  if (!allowed.empty()) ApplyMask(allowed);
  dense_ = true;
  sorted_ = false;

  // Below 1e-5 (vLLM's threshold) sampling is greedy in all but exact ties, and
  // 1 / temperature stays finite.
  const bool greedy = params_.temperature < kMinTemperature;
  const bool processed = params_.logprobs_mode == LogprobsMode::kProcessed;
  int32_t token;
  if (greedy && !processed) {
    token = BestSurvivor();  // Truncation always keeps the argmax: skip it.
  } else {
    TopK(params_.top_k);
    TopP(params_.top_p);
    MinP(params_.min_p);
    const float max = MaxSurvivorLogit();
    const float temperature = greedy ? 1.0f : params_.temperature;
    const double total = Weigh(max, temperature);
    token = greedy ? BestSurvivor() : Draw(total);
    if (processed) ProcessedLogprobs(max, temperature, total, token, result);
  }
  if (!processed) RawLogprobs(logits, token, result);

  result.token = token;
  result.end_of_generation = std::find(params_.stop_token_ids.begin(), params_.stop_token_ids.end(),
                                       token) != params_.stop_token_ids.end();
  AcceptGeneratedToken(token);
  return result;
}

}  // namespace tessera::sampling
