#include "common/tokenizer/pre_tokenizer.h"

#define PCRE2_CODE_UNIT_WIDTH 8
#include <pcre2.h>

#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"

namespace tessera::tokenizer {

struct PreTokenizer::Compiled {
  std::vector<pcre2_code*> codes;
  bool jit = true;  // every regex JIT-compiled: pcre2_jit_match's fast path is safe
  ~Compiled() {
    for (pcre2_code* c : codes) pcre2_code_free(c);
  }
};

absl::StatusOr<PreTokenizer> PreTokenizer::Create(const PreTokenizerSpec& spec) {
  auto compiled = std::make_shared<Compiled>();
  for (size_t i = 0; i < spec.regexes.size(); ++i) {
    const char* pattern = spec.regexes[i];
    int error = 0;
    PCRE2_SIZE offset = 0;
    // DOLLAR_ENDONLY: `$` means the end of the piece, as in ECMAScript (llama.cpp's engine).
    pcre2_code* code =
        pcre2_compile(reinterpret_cast<PCRE2_SPTR>(pattern), PCRE2_ZERO_TERMINATED,
                      PCRE2_UTF | PCRE2_UCP | PCRE2_MATCH_INVALID_UTF | PCRE2_DOLLAR_ENDONLY,
                      &error, &offset, nullptr);
    if (code == nullptr) {
      PCRE2_UCHAR message[256];
      pcre2_get_error_message(error, message, sizeof(message));
      const std::string reason(reinterpret_cast<const char*>(message));
      return absl::InternalError(absl::StrCat("pre-tokenizer ", std::string(spec.name), ": regex ",
                                              i, " does not compile at offset ",
                                              static_cast<uint64_t>(offset), ": ", reason));
    }
    // JIT is an optimisation: when unavailable the interpreter gives the same matches.
    if (pcre2_jit_compile(code, PCRE2_JIT_COMPLETE) != 0) compiled->jit = false;
    compiled->codes.push_back(code);
  }
  return PreTokenizer(std::move(compiled));
}

namespace {

// Per-call PCRE2 state (match data and a JIT stack big enough for long whitespace runs).
class MatchState {
 public:
  MatchState(const pcre2_code* any_code, bool jit)
      : jit_(jit),
        data_(pcre2_match_data_create_from_pattern(any_code, nullptr)),
        context_(pcre2_match_context_create(nullptr)),
        stack_(pcre2_jit_stack_create(32 * 1024, 4 * 1024 * 1024, nullptr)) {
    if (stack_ != nullptr) pcre2_jit_stack_assign(context_, nullptr, stack_);
  }
  ~MatchState() {
    pcre2_match_data_free(data_);
    pcre2_match_context_free(context_);
    if (stack_ != nullptr) pcre2_jit_stack_free(stack_);
  }
  MatchState(const MatchState&) = delete;
  MatchState& operator=(const MatchState&) = delete;

  // Finds the next match of `code` in `subject` at or after `start`: true with [*begin, *end).
  bool Find(const pcre2_code* code, std::string_view subject, size_t start, size_t* begin,
            size_t* end) {
    auto* s = reinterpret_cast<PCRE2_SPTR>(subject.data());
    // pcre2_jit_match skips pcre2_match's per-call checks; PCRE2_MATCH_INVALID_UTF makes
    // the JIT code itself safe on invalid UTF-8.
    int rc = jit_ ? pcre2_jit_match(code, s, subject.size(), start, 0, data_, context_)
                  : pcre2_match(code, s, subject.size(), start, 0, data_, context_);
    if (rc < 0 && rc != PCRE2_ERROR_NOMATCH) {
      // A JIT resource limit: retry with the interpreter rather than mis-split.
      rc = pcre2_match(code, s, subject.size(), start, PCRE2_NO_JIT, data_, context_);
    }
    if (rc < 0) return false;
    const PCRE2_SIZE* ov = pcre2_get_ovector_pointer(data_);
    *begin = ov[0];
    *end = ov[1];
    return true;
  }

 private:
  bool jit_;
  pcre2_match_data* data_;
  pcre2_match_context* context_;
  pcre2_jit_stack* stack_;
};

// Splits one piece by one regex, appending matches and gaps to `out`.
void SplitPiece(const pcre2_code* code, std::string_view piece, MatchState& state,
                std::vector<std::string_view>* out) {
  size_t gap_start = 0;
  size_t pos = 0;
  size_t begin = 0, end = 0;
  while (pos < piece.size() && state.Find(code, piece, pos, &begin, &end)) {
    if (end == begin) {  // an empty match splits nothing; step over one code point
      pos = begin + 1;
      while (pos < piece.size() && (static_cast<uint8_t>(piece[pos]) & 0xC0) == 0x80) ++pos;
      continue;
    }
    if (begin > gap_start) out->push_back(piece.substr(gap_start, begin - gap_start));
    out->push_back(piece.substr(begin, end - begin));
    gap_start = pos = end;
  }
  if (gap_start < piece.size()) out->push_back(piece.substr(gap_start));
}

}  // namespace

void PreTokenizer::Split(std::string_view text, std::vector<std::string_view>* pieces) const {
  pieces->clear();
  if (text.empty()) return;
  pieces->push_back(text);
  if (compiled_->codes.empty()) return;
  MatchState state(compiled_->codes.front(), compiled_->jit);
  std::vector<std::string_view> next;
  for (const pcre2_code* code : compiled_->codes) {
    next.clear();
    for (std::string_view piece : *pieces) SplitPiece(code, piece, state, &next);
    pieces->swap(next);
  }
}

}  // namespace tessera::tokenizer
