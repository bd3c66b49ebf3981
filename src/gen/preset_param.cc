#include "gen/preset_param.h"

#include <charconv>
#include <cmath>
#include <system_error>

#include <fmt/format.h>

namespace bucketsim {

std::string PresetParam::ValueHint() const {
  switch (kind) {
    case ParamKind::kInt:
      return "INT";
    case ParamKind::kNumber:
      return "NUMBER";
    case ParamKind::kBool:
      return "BOOL";
    case ParamKind::kChoice:
      return fmt::format("{}", fmt::join(choices, "|"));
  }
  return "?";
}

std::string PresetParam::StatedDefault() const {
  return default_depends_on.empty() ? get() : "by --" + default_depends_on;
}

Status UnknownChoice(std::string_view text, const std::vector<std::string>& choices) {
  std::string list;
  for (std::size_t i = 0; i < choices.size(); ++i) {
    if (i != 0) list += i + 1 == choices.size() ? " or " : ", ";
    list += choices[i];
  }
  return InvalidArgument(fmt::format("'{}' is not one of {}", text, list));
}

Result<bool> ParseBoolText(std::string_view text) {
  for (std::string_view yes : {"true", "1", "yes", "on"}) {
    if (text == yes) return true;
  }
  for (std::string_view no : {"false", "0", "no", "off"}) {
    if (text == no) return false;
  }
  return InvalidArgument(fmt::format("'{}' is not a boolean (true or false)", text));
}

PresetParam IntParam(std::string name, std::string meaning, int& target) {
  PresetParam param{std::move(name), std::move(meaning), ParamKind::kInt, {}, {}, {}};
  param.get = [&target] { return fmt::format("{}", target); };
  param.set = [&target](std::string_view text) {
    int value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, error] = std::from_chars(text.data(), end, value);
    if (error == std::errc::result_out_of_range) {
      return InvalidArgument(fmt::format("'{}' is out of range for an integer", text));
    }
    if (error != std::errc() || ptr != end || text.empty()) {
      return InvalidArgument(fmt::format("'{}' is not an integer", text));
    }
    target = value;
    return Status::Ok();
  };
  return param;
}

PresetParam NumberParam(std::string name, std::string meaning, double& target) {
  PresetParam param{std::move(name), std::move(meaning), ParamKind::kNumber, {}, {}, {}};
  param.get = [&target] { return fmt::format("{}", target); };
  param.set = [&target](std::string_view text) {
    double value = 0;
    const char* end = text.data() + text.size();
    auto [ptr, error] = std::from_chars(text.data(), end, value);
    if (error != std::errc() || ptr != end || text.empty() || !std::isfinite(value)) {
      return InvalidArgument(fmt::format("'{}' is not a finite number", text));
    }
    target = value;
    return Status::Ok();
  };
  return param;
}

PresetParam BoolParam(std::string name, std::string meaning, bool& target) {
  PresetParam param{std::move(name), std::move(meaning), ParamKind::kBool, {}, {}, {}};
  param.get = [&target] { return std::string(target ? "true" : "false"); };
  param.set = [&target](std::string_view text) {
    Result<bool> value = ParseBoolText(text);
    if (!value.ok()) return value.status();
    target = *value;
    return Status::Ok();
  };
  return param;
}

PresetParam SwitchParam(std::string name, std::string meaning, bool& target) {
  PresetParam param = BoolParam(std::move(name), std::move(meaning), target);
  param.kind = ParamKind::kChoice;
  param.choices = {"true", "false"};
  return param;
}

PresetParam DTypeParam(std::string name, std::string meaning, DType& target) {
  // The floating-point types FSDP computes and reduces in; fp8 and fp64 are not presets' job.
  return ChoiceParam(
      std::move(name), std::move(meaning), target,
      {{"fp32", DType::kFloat32}, {"bf16", DType::kBFloat16}, {"fp16", DType::kFloat16}});
}

}  // namespace bucketsim
