// Errors inside the template engine. The engine is a deep recursive evaluator, so it reports
// failures by throwing these; the public API (common/chat/template.h) catches them and returns
// absl::Status. No exception crosses that boundary.
#pragma once

#include <stdexcept>
#include <string>

namespace tessera::chat {

// A parse or evaluation error. `line` is the 1-based template line, 0 while not yet known
// (the evaluator fills it in from the statement being executed).
class TemplateError : public std::runtime_error {
 public:
  explicit TemplateError(const std::string& message, int line = 0)
      : std::runtime_error(message), line_(line) {}
  int line() const { return line_; }
  void set_line(int line) { line_ = line; }

 private:
  int line_;
};

// The output grew past the caller's limit (ChatTemplate::RenderTracked's max_output_bytes).
class OutputLimitError : public std::runtime_error {
 public:
  explicit OutputLimitError(const std::string& message) : std::runtime_error(message) {}
};

// The template called raise_exception(message): the message is the whole error text.
class RaisedException : public std::runtime_error {
 public:
  explicit RaisedException(const std::string& message) : std::runtime_error(message) {}
};

}  // namespace tessera::chat
