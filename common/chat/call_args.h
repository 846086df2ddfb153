// Binds a call's positional and keyword arguments to a Python-style parameter list, for the
// filters, tests, methods and globals the engine implements.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "common/chat/template_error.h"
#include "common/chat/value.h"

namespace tessera::chat {

class BoundArgs {
 public:
  // Binds `args` to `params` in order; a keyword not in `params` or too many positional
  // arguments is a TypeError naming `function`.
  BoundArgs(const std::string& function, const CallArgs& args,
            std::initializer_list<const char*> params)
      : function_(function), slots_(params.size()) {
    std::vector<const char*> names(params);
    if (args.positional.size() > names.size()) {
      throw TemplateError("TypeError: " + function + "() takes at most " +
                          std::to_string(names.size()) + " argument(s), " +
                          std::to_string(args.positional.size()) + " given");
    }
    for (size_t i = 0; i < args.positional.size(); ++i) slots_[i] = args.positional[i];
    for (const auto& [k, v] : args.keyword) {
      size_t i = 0;
      while (i < names.size() && k != names[i]) ++i;
      if (i == names.size()) {
        throw TemplateError("TypeError: " + function + "() got an unexpected keyword argument '" +
                            k + "'");
      }
      slots_[i] = v;
    }
  }

  bool Has(size_t i) const { return slots_[i].has_value() && !slots_[i]->is_undefined(); }
  const Value& Get(size_t i) const {
    if (!slots_[i]) {
      throw TemplateError("TypeError: " + function_ + "() is missing argument " +
                          std::to_string(i + 1));
    }
    return *slots_[i];
  }
  Value Or(size_t i, Value dflt) const { return slots_[i] ? *slots_[i] : std::move(dflt); }
  bool Bool(size_t i, bool dflt) const { return slots_[i] ? Truthy(*slots_[i]) : dflt; }
  int64_t Int(size_t i, int64_t dflt) const {
    if (!slots_[i] || slots_[i]->is_none()) return dflt;
    if (!slots_[i]->is_int() && !slots_[i]->is_bool()) {
      throw TemplateError("TypeError: " + function_ + "() expects an integer, got " +
                          TypeName(*slots_[i]));
    }
    return slots_[i]->as_int();
  }
  // A string argument that must be given (missing or none is a TypeError, as in Python).
  std::string RequiredString(size_t i) const {
    std::optional<std::string> s = String(i);
    if (!s) {
      throw TemplateError("TypeError: " + function_ + "() argument " + std::to_string(i + 1) +
                          " must be str");
    }
    return *s;
  }
  std::optional<std::string> String(size_t i) const {
    if (!slots_[i] || slots_[i]->is_none()) return std::nullopt;
    if (!slots_[i]->is_string()) {
      throw TemplateError("TypeError: " + function_ + "() expects a string, got " +
                          TypeName(*slots_[i]));
    }
    return slots_[i]->as_string();
  }

 private:
  std::string function_;
  std::vector<std::optional<Value>> slots_;
};

}  // namespace tessera::chat
