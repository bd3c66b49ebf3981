// One parameter of a trace generator, as data: its name (the CLI flag without "--"), what it
// means, the kind of value it takes, and accessors bound to one configuration object. The CLI
// builds its flags from these entries and `bucketsim gen --list` prints them, so the two can
// never disagree; a fresh configuration's `get()` is the parameter's default.
#pragma once

#include <functional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "core/dtype.h"
#include "core/status.h"

namespace bucketsim {

enum class ParamKind { kInt, kNumber, kBool, kChoice };

struct PresetParam {
  std::string name;     // "layers": the flag --layers
  std::string meaning;  // one line
  ParamKind kind = ParamKind::kInt;
  std::vector<std::string> choices;                  // kChoice: the accepted values
  std::function<std::string()> get;                  // the current value as text
  std::function<Status(std::string_view text)> set;  // parses `text`; the message names no flag
  // Non-empty: the default depends on that flag ("fsdp-impl": --param-dtype's is bf16 for
  // fairscale, fp32 for fsdp1 and fsdp2), and `meaning` states it for each value; a fresh
  // configuration's get() is then only one of them, never printed as the default.
  std::string default_depends_on = {};

  // "INT", "NUMBER", "BOOL" or "a|b|c": the value a user types.
  std::string ValueHint() const;
  // The default as help and --list state it: get(), or "by --FLAG" (see default_depends_on).
  std::string StatedDefault() const;
};

// "'x' is not one of a, b or c".
Status UnknownChoice(std::string_view text, const std::vector<std::string>& choices);
// Parses a whole string as a bool the way the CLI spells it: true/false, 1/0, yes/no, on/off.
Result<bool> ParseBoolText(std::string_view text);

// Entries bound to `target`, which must outlive them.
PresetParam IntParam(std::string name, std::string meaning, int& target);
PresetParam NumberParam(std::string name, std::string meaning, double& target);
PresetParam BoolParam(std::string name, std::string meaning, bool& target);
// A PyTorch on/off setting: a value is required (`--limit-all-gathers off`, as PyTorch users
// write True/False), spelled as ParseBoolText accepts; shown as "true|false".
PresetParam SwitchParam(std::string name, std::string meaning, bool& target);
PresetParam DTypeParam(std::string name, std::string meaning, DType& target);
// A choice among named values of an enum; `names[i]` names `values[i]`.
template <typename Enum>
PresetParam ChoiceParam(std::string name, std::string meaning, Enum& target,
                        std::vector<std::pair<std::string, Enum>> names) {
  PresetParam param{std::move(name), std::move(meaning), ParamKind::kChoice, {}, {}, {}};
  for (const auto& entry : names) param.choices.push_back(entry.first);
  param.get = [&target, names] {
    for (const auto& [text, value] : names) {
      if (value == target) return text;
    }
    return std::string("?");
  };
  param.set = [&target, names, choices = param.choices](std::string_view text) {
    for (const auto& [candidate, value] : names) {
      if (candidate == text) {
        target = value;
        return Status::Ok();
      }
    }
    return UnknownChoice(text, choices);
  };
  return param;
}

}  // namespace bucketsim
