// A deterministic serving::Engine for the REST gateway's tests and the OpenAI client test
// server. One engine thread runs every request from a timed queue (so thousands of slow
// requests cost no threads). Tokens are bytes: Tokenize maps each byte to its value
// (add_special prepends BOS = 256), and a request "generates" its prompt back (BOS and
// other specials skipped), one token per event, then finishes with "stop" -- or "length"
// when max_tokens cuts it; ignore_eos with max_tokens repeats the prompt until then. Stop
// strings end generation with "stop" and are not returned (text that may begin one is held
// back, as the real engine does). Event text is valid UTF-8 (bytes of an incomplete or
// invalid sequence are held or replaced with U+FFFD) unless Options::raw_text.
//
// Expected outputs therefore follow from the prompt by hand. Knobs: per-token delay, a
// Submit error, a failure after N tokens, holding requests (never producing a token until
// cancelled), readiness. It records every request and counts cancels.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "controller/serving/engine.h"

namespace tessera::testing {

struct ScriptedEngineOptions {
  std::string model_name = "scripted-echo";
  std::chrono::milliseconds token_delay{0};
  absl::Status submit_error;   // non-OK: Submit answers this
  int fail_after_tokens = -1;  // >= 0: the request ends with fail_status after N tokens
  absl::Status fail_status = absl::UnavailableError("worker rank 0 died");
  bool hold = false;      // requests produce nothing until cancelled
  bool raw_text = false;  // event text is the raw token bytes (may be invalid UTF-8)
};

class ScriptedEngine : public serving::Engine {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kVocab = 258;

  // Log-probability of the i-th generated token (0-based), exact in float: -(i + 1) / 8;
  // the k-th alternative is token (id + k) % kVocab with LogprobAt(i) - k.
  static float LogprobAt(int i) { return -static_cast<float>(i + 1) / 8.0f; }

  using Options = ScriptedEngineOptions;

  explicit ScriptedEngine(Options options = Options()) : options_(std::move(options)) {
    info_.name = options_.model_name;
    info_.architecture = "echo";
    info_.path = "/models/echo.gguf";
    info_.context_length = 4096;
    info_.max_model_len = 4096;
    info_.n_vocab = kVocab;
    info_.quantization = "F32";
    info_.created_unix = 1700000000;
    info_.eog_token_ids = {kEos};
    thread_ = std::thread([this] { Loop(); });
  }

  ~ScriptedEngine() override {
    {
      std::lock_guard<std::mutex> lock(mu_);
      stop_ = true;
    }
    cv_.notify_all();
    thread_.join();
  }

  // Knobs apply to requests submitted afterwards.
  void Configure(const std::function<void(Options&)>& edit) {
    std::lock_guard<std::mutex> lock(mu_);
    edit(options_);
  }
  void set_ready(bool ready) { ready_.store(ready); }
  int cancels() const { return cancels_.load(); }
  std::vector<serving::GenerateRequest> requests() const {
    std::lock_guard<std::mutex> lock(mu_);
    return recorded_;
  }
  int running() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int>(live_.size());
  }

  absl::StatusOr<std::unique_ptr<serving::RequestHandle>> Submit(serving::GenerateRequest request,
                                                                 serving::EventSink sink) override {
    std::lock_guard<std::mutex> lock(mu_);
    if (!options_.submit_error.ok()) return options_.submit_error;
    if (draining_.load() || !ready_.load()) {
      return absl::UnavailableError("engine is not accepting requests");
    }
    recorded_.push_back(request);
    auto r = std::make_shared<Running>();
    r->id = next_id_++;
    r->request = std::move(request);
    r->sink = std::move(sink);
    r->options = options_;
    for (int32_t id : r->request.prompt_tokens) {
      if (id < 256) r->echo.push_back(id);
    }
    r->due = options_.hold ? Clock::time_point::max() : Clock::now() + options_.token_delay;
    live_[r->id] = r;
    cv_.notify_all();
    return std::unique_ptr<serving::RequestHandle>(new Handle(this, r->id));
  }

  const serving::ModelInfo& info() const override { return info_; }

  absl::StatusOr<std::vector<int32_t>> Tokenize(const std::string& text,
                                                bool add_special) const override {
    std::vector<int32_t> ids;
    if (add_special) ids.push_back(kBos);
    for (unsigned char c : text) ids.push_back(c);
    return ids;
  }

  absl::StatusOr<std::string> Detokenize(const std::vector<int32_t>& ids) const override {
    std::string text;
    for (int32_t id : ids) text += TokenText(id);
    return text;
  }

  // "<|role|>content\n" per message, then "<|assistant|>".
  absl::StatusOr<std::string> RenderChat(const std::vector<serving::ChatMessage>& messages,
                                         bool add_generation_prompt) const override {
    std::string out;
    for (const auto& m : messages) out += absl::StrCat("<|", m.role, "|>", m.content, "\n");
    if (add_generation_prompt) out += "<|assistant|>";
    return out;
  }

  std::string TokenText(int32_t id) const override {
    if (id >= 0 && id < 256) return std::string(1, static_cast<char>(id));
    if (id == kBos) return "<s>";
    return "";
  }

  bool ready() const override { return ready_.load() && !draining_.load(); }
  void StartDrain() override { draining_.store(true); }
  int InFlight() const override { return running(); }

 private:
  using Clock = std::chrono::steady_clock;

  struct Running {
    uint64_t id = 0;
    serving::GenerateRequest request;
    serving::EventSink sink;
    Options options;
    std::vector<int32_t> echo;
    size_t produced = 0;
    std::string text;     // all text decided so far
    size_t emitted = 0;   // bytes of `text` sent
    std::string pending;  // bytes of an incomplete UTF-8 sequence
    bool cancelled = false;
    Clock::time_point due;
  };

  class Handle : public serving::RequestHandle {
   public:
    Handle(ScriptedEngine* e, uint64_t id) : engine_(e), id_(id) {}
    void Cancel() override { engine_->Cancel(id_); }

   private:
    ScriptedEngine* engine_;
    uint64_t id_;
  };

  void Cancel(uint64_t id) {
    std::lock_guard<std::mutex> lock(mu_);
    cancels_.fetch_add(1);
    auto it = live_.find(id);
    if (it == live_.end()) return;
    it->second->cancelled = true;
    it->second->due = Clock::now();
    cv_.notify_all();
  }

  // Length of the UTF-8 sequence a lead byte starts; 0 when it cannot start one.
  static size_t SequenceLength(unsigned char c) {
    if (c < 0x80) return 1;
    if (c >= 0xC2 && c <= 0xDF) return 2;
    if (c >= 0xE0 && c <= 0xEF) return 3;
    if (c >= 0xF0 && c <= 0xF4) return 4;
    return 0;
  }

  // Appends one byte token to r.text, keeping it valid UTF-8 (unless raw_text).
  static void AppendByte(Running& r, unsigned char c) {
    if (r.options.raw_text) {
      r.text.push_back(static_cast<char>(c));
      return;
    }
    if (!r.pending.empty() && (c & 0xC0) != 0x80) {
      r.text += "\xEF\xBF\xBD";  // an unfinished sequence
      r.pending.clear();
    }
    if (r.pending.empty() && SequenceLength(c) == 0) {
      r.text += "\xEF\xBF\xBD";
      return;
    }
    r.pending.push_back(static_cast<char>(c));
    if (r.pending.size() == SequenceLength(static_cast<unsigned char>(r.pending[0]))) {
      r.text += r.pending;
      r.pending.clear();
    }
  }

  // The text that may now be sent: everything decided, less a tail that could begin a stop
  // string. Sets *stop_at when a stop string was found.
  static std::string Releasable(Running& r, bool* stopped) {
    size_t end = r.text.size();
    *stopped = false;
    for (const std::string& stop : r.request.stop) {
      const size_t at = r.text.find(stop);
      if (at != std::string::npos && at < end) {
        end = at;
        *stopped = true;
      }
    }
    if (!*stopped) {
      for (const std::string& stop : r.request.stop) {
        for (size_t k = std::min(stop.size() - 1, r.text.size()); k > 0; --k) {
          if (r.text.compare(r.text.size() - k, k, stop, 0, k) == 0) {
            end = std::min(end, r.text.size() - k);
            break;
          }
        }
      }
    }
    end = std::max(end, r.emitted);
    std::string out = r.text.substr(r.emitted, end - r.emitted);
    r.emitted = end;
    return out;
  }

  // Produces the next event of `r`; true when it was the last.
  static bool Step(Running& r, serving::GenerateEvent* event) {
    const int32_t prompt = static_cast<int32_t>(r.request.prompt_tokens.size());
    auto finish = [&](const std::string& reason, absl::Status status) {
      event->finished = true;
      event->finish_reason = reason;
      event->status = std::move(status);
      event->usage = {prompt, static_cast<int32_t>(r.produced)};
      return true;
    };
    if (r.cancelled) return finish("abort", absl::CancelledError("request cancelled"));
    if (static_cast<int>(r.produced) == r.options.fail_after_tokens) {
      return finish("abort", r.options.fail_status);
    }
    const size_t max = r.request.max_tokens > 0 ? static_cast<size_t>(r.request.max_tokens) : 0;
    if (max > 0 && r.produced == max) {
      event->text = r.text.substr(r.emitted);  // held-back text is complete now
      return finish("length", absl::OkStatus());
    }
    const bool repeat = r.request.ignore_eos && max > 0 && !r.echo.empty();
    if (r.produced >= r.echo.size() && !repeat) {
      event->text = r.text.substr(r.emitted);
      return finish("stop", absl::OkStatus());
    }
    const int32_t id = r.echo[r.produced % r.echo.size()];
    event->token_ids = {id};
    if (r.request.logprobs) {
      const float lp = LogprobAt(static_cast<int>(r.produced));
      serving::TokenLogprobs token{id, lp, {}};
      for (int k = 0; k < r.request.top_logprobs; ++k) {
        token.top.emplace_back((id + k) % kVocab, lp - static_cast<float>(k));
      }
      event->logprobs.push_back(std::move(token));
    }
    ++r.produced;
    AppendByte(r, static_cast<unsigned char>(id));
    bool stopped = false;
    event->text = Releasable(r, &stopped);
    if (stopped) return finish("stop", absl::OkStatus());
    return false;
  }

  void Loop() {
    std::unique_lock<std::mutex> lock(mu_);
    while (!stop_) {
      std::shared_ptr<Running> next;
      for (auto& [id, r] : live_) {
        if (!next || r->due < next->due) next = r;
      }
      if (!next) {
        cv_.wait(lock);
        continue;
      }
      if (next->due > Clock::now()) {
        if (next->due == Clock::time_point::max()) {
          cv_.wait(lock);
        } else {
          cv_.wait_until(lock, next->due);
        }
        continue;
      }
      serving::GenerateEvent event;
      const bool last = Step(*next, &event);
      next->due = Clock::now() + next->options.token_delay;
      if (last) live_.erase(next->id);
      // The sink runs without the lock, as a real engine thread would call it.
      lock.unlock();
      next->sink(std::move(event));
      lock.lock();
    }
    // Requests still live when the engine is destroyed end as cancelled.
    for (auto& [id, r] : live_) {
      serving::GenerateEvent event;
      event.finished = true;
      event.finish_reason = "abort";
      event.status = absl::CancelledError("engine destroyed");
      r->sink(std::move(event));
    }
    live_.clear();
  }

  mutable std::mutex mu_;
  std::condition_variable cv_;
  Options options_;
  serving::ModelInfo info_;
  std::atomic<bool> ready_{true};
  std::atomic<bool> draining_{false};
  std::atomic<int> cancels_{0};
  std::vector<serving::GenerateRequest> recorded_;
  std::map<uint64_t, std::shared_ptr<Running>> live_;
  uint64_t next_id_ = 1;
  bool stop_ = false;
  std::thread thread_;
};

}  // namespace tessera::testing
