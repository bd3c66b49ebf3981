// A streaming JSON writer for reports: values go straight into a string as they are produced,
// indented by two spaces like nlohmann's dump(2), so a report of millions of collectives costs
// its text and nothing more (a DOM of it cost ten times the memory and most of the run time).
// Given a sink, the text goes to the sink in pieces of about kFlushBytes as it is written, so
// writing a report to a file holds none of it whole.
// Misuse (a value where a key is due, unbalanced ends) is a bug and fails a BUCKETSIM_CHECK.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <string_view>
#include <vector>

namespace bucketsim {

class JsonWriter {
 public:
  using Sink = std::function<void(std::string_view text)>;
  static constexpr std::size_t kFlushBytes = 64 * 1024;

  JsonWriter() = default;
  explicit JsonWriter(Sink sink) : sink_(std::move(sink)) {}

  void BeginObject() { Open('{', /*object=*/true); }
  void EndObject() { Close('}'); }
  void BeginArray() { Open('[', /*object=*/false); }
  void EndArray() { Close(']'); }
  void Key(std::string_view key);

  void String(std::string_view value);
  void Uint(std::uint64_t value);
  void Int(std::int64_t value);
  // Shortest round-trip digits, always with a '.' or an exponent so it reads back as a float.
  void Double(double value);
  void Bool(bool value);
  void Null();
  // A value already written as JSON text by a writer at depth `written_at_depth` (the number of
  // objects and arrays around it there: RunJsonFragment's entries sit at 2), its lines indented
  // again for this writer's depth, which must be no less.
  void Raw(std::string_view json, std::size_t written_at_depth);

  template <typename T>
  void Field(std::string_view key, const T& value) {
    Key(key);
    Value(value);
  }
  void Value(std::string_view v) { String(v); }
  void Value(const std::string& v) { String(v); }
  void Value(const char* v) { String(v); }
  void Value(double v) { Double(v); }
  void Value(bool v) { Bool(v); }
  void Value(int v) { Int(v); }
  void Value(unsigned v) { Uint(v); }
  void Value(unsigned long v) { Uint(v); }
  void Value(unsigned long long v) { Uint(v); }
  void Value(long v) { Int(v); }
  void Value(long long v) { Int(v); }

  // The document, with a final newline; every object and array must be closed. With a sink, the
  // rest of the text goes to it and the result is empty.
  std::string Finish();

 private:
  struct Level {
    bool object;
    bool empty = true;
  };
  void BeforeValue();
  void Open(char bracket, bool object);
  void Close(char bracket);
  void NewLine();
  void WriteEscaped(std::string_view value);  // a JSON string literal, UTF-8 passed through
  void FlushIfFull() {
    if (sink_ && out_.size() >= kFlushBytes) Flush();
  }
  void Flush();

  Sink sink_;
  std::string out_;
  bool started_ = false;  // the top-level value has begun
  std::vector<Level> levels_;
  bool key_pending_ = false;
};

}  // namespace bucketsim
