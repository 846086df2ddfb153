// A small deterministic serving::Engine for API-layer tests (gRPC service, REST gateway,
// client tests): its vocabulary is the 256 bytes plus BOS (256) and EOS (257), and a
// request "generates" its own prompt back, one token per event on a thread of its own,
// then EOS. Expected outputs therefore follow from the prompt by hand.
//
// Knobs: a delay per token (so a test can cancel mid-stream), a Submit error (queue full,
// ...), a failure after N tokens, readiness. It records the last request and every cancel.
#pragma once

#include <algorithm>
#include <atomic>
#include <chrono>
#include <condition_variable>
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

class EchoEngine : public serving::Engine {
 public:
  static constexpr int32_t kBos = 256;
  static constexpr int32_t kEos = 257;
  static constexpr int32_t kVocab = 258;

  // Logprob of the i-th generated token (0-based), exact in float: -(i + 1) / 8.
  static float LogprobAt(int i) { return -static_cast<float>(i + 1) / 8.0f; }

  struct Options {
    std::chrono::milliseconds token_delay{0};
    absl::Status submit_error;   // non-OK: Submit answers this
    int fail_after_tokens = -1;  // >= 0: the request ends with fail_status after N tokens
    absl::Status fail_status = absl::UnavailableError("worker rank 0 died");
  };

  EchoEngine() : EchoEngine(Options{}) {}
  explicit EchoEngine(Options options) : options_(std::move(options)) {
    info_.name = "echo";
    info_.architecture = "echo";
    info_.path = "/models/echo.gguf";
    info_.context_length = 4096;
    info_.max_model_len = 4096;
    info_.n_vocab = kVocab;
    info_.tp = 1;
    info_.quantization = "F32";
    info_.created_unix = 1700000000;
    info_.eog_token_ids = {kEos};
  }

  ~EchoEngine() override {
    std::vector<std::thread> threads;
    {
      std::lock_guard<std::mutex> lock(mu_);
      for (auto& r : requests_) r->Cancel();
      threads.swap(threads_);
    }
    for (auto& t : threads) t.join();
  }

  void set_options(Options options) {
    std::lock_guard<std::mutex> lock(mu_);
    options_ = std::move(options);
  }
  void set_token_delay(std::chrono::milliseconds delay) {
    std::lock_guard<std::mutex> lock(mu_);
    options_.token_delay = delay;
  }
  void set_submit_error(absl::Status status) {
    std::lock_guard<std::mutex> lock(mu_);
    options_.submit_error = std::move(status);
  }
  void set_fail_after_tokens(int n) {
    std::lock_guard<std::mutex> lock(mu_);
    options_.fail_after_tokens = n;
  }
  void set_ready(bool ready) { ready_.store(ready); }
  int cancels() const { return cancels_.load(); }
  int submits() const { return submits_.load(); }
  std::optional<serving::GenerateRequest> last_request() const {
    std::lock_guard<std::mutex> lock(mu_);
    return last_request_;
  }

  absl::StatusOr<std::unique_ptr<serving::RequestHandle>> Submit(serving::GenerateRequest request,
                                                                 serving::EventSink sink) override {
    std::lock_guard<std::mutex> lock(mu_);
    submits_.fetch_add(1);
    if (!options_.submit_error.ok()) return options_.submit_error;
    if (draining_.load() || !ready_.load()) {
      return absl::UnavailableError("engine is not accepting requests");
    }
    last_request_ = request;
    auto state = std::make_shared<Request>(this);
    requests_.push_back(state);
    threads_.emplace_back([this, state, request = std::move(request), sink = std::move(sink),
                           options = options_]() mutable { Run(*state, request, sink, options); });
    return std::unique_ptr<serving::RequestHandle>(new Handle(state));
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
    if (id == kEos) return "";
    return "";
  }

  bool ready() const override { return ready_.load() && !draining_.load(); }
  void StartDrain() override { draining_.store(true); }
  int InFlight() const override { return in_flight_.load(); }

 private:
  struct Request {
    explicit Request(EchoEngine* e) : engine(e) {}
    // Not counted: the engine's destructor cancels every request this way.
    void Cancel() {
      std::lock_guard<std::mutex> lock(mu);
      cancelled = true;
      cv.notify_all();
    }
    EchoEngine* engine;
    std::mutex mu;
    std::condition_variable cv;
    bool cancelled = false;
  };

  class Handle : public serving::RequestHandle {
   public:
    explicit Handle(std::shared_ptr<Request> r) : r_(std::move(r)) {}
    void Cancel() override {
      r_->engine->cancels_.fetch_add(1);
      r_->Cancel();
    }

   private:
    std::shared_ptr<Request> r_;
  };

  void Run(Request& state, const serving::GenerateRequest& request, const serving::EventSink& sink,
           const Options& options) {
    in_flight_.fetch_add(1);
    std::vector<int32_t> echo;
    for (int32_t id : request.prompt_tokens) {
      if (id != kBos) echo.push_back(id);
    }
    echo.push_back(kEos);
    serving::GenerateEvent last;
    last.finished = true;
    last.finish_reason = "stop";
    int produced = 0;
    for (size_t i = 0; i < echo.size(); ++i) {
      {
        std::unique_lock<std::mutex> lock(state.mu);
        state.cv.wait_for(lock, options.token_delay, [&] { return state.cancelled; });
        if (state.cancelled) {
          last.finish_reason = "abort";
          last.status = absl::CancelledError("request cancelled");
          break;
        }
      }
      if (produced == options.fail_after_tokens) {
        last.finish_reason = "abort";
        last.status = options.fail_status;
        break;
      }
      if (request.max_tokens > 0 && produced == request.max_tokens) {
        last.finish_reason = "length";
        break;
      }
      const int32_t id = echo[i];
      serving::GenerateEvent event;
      event.token_ids = {id};
      event.text = TokenText(id);
      if (request.logprobs) {
        serving::TokenLogprobs lp{id, LogprobAt(produced), {}};
        for (int k = 0; k < request.top_logprobs; ++k) {
          lp.top.emplace_back((id + k) % kVocab, LogprobAt(produced) - static_cast<float>(k));
        }
        event.logprobs.push_back(lp);
      }
      ++produced;
      const bool is_stop_id =
          id == kEos || std::find(request.stop_token_ids.begin(), request.stop_token_ids.end(),
                                  id) != request.stop_token_ids.end();
      if (is_stop_id) {
        event.finished = true;
        event.finish_reason = "stop";
        event.usage = {static_cast<int32_t>(request.prompt_tokens.size()), produced};
        sink(std::move(event));
        in_flight_.fetch_sub(1);
        return;
      }
      sink(std::move(event));
    }
    last.usage = {static_cast<int32_t>(request.prompt_tokens.size()), produced};
    sink(std::move(last));
    in_flight_.fetch_sub(1);
  }

  mutable std::mutex mu_;
  Options options_;
  serving::ModelInfo info_;
  std::atomic<bool> ready_{true};
  std::atomic<bool> draining_{false};
  std::atomic<int> in_flight_{0};
  std::atomic<int> cancels_{0};
  std::atomic<int> submits_{0};
  std::optional<serving::GenerateRequest> last_request_;
  std::vector<std::shared_ptr<Request>> requests_;
  std::vector<std::thread> threads_;
};

}  // namespace tessera::testing
