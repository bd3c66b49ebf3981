// A small, fast JSON lexer over a chunked input buffer, for the trace reader's events array
// (src/io/trace_reader.cc). nlohmann_json reads the header; once "events" begins, the reader
// lexes the (flat) event objects with this scanner, which is several times faster than
// nlohmann's character-by-character lexer.
//
// The scanner follows nlohmann's lexer to the letter where it matters to users: the same tokens
// are accepted and rejected, numbers get the same type (unsigned, signed or float, with integers
// beyond 64 bits read as floats), strings are decoded and validated (escapes, \uXXXX with
// surrogate pairs, UTF-8) the same way, and errors carry nlohmann's wording and its line/column
// convention. Only "last read" may be shorter: nlohmann quotes everything read since its last
// string or number token, the scanner quotes the offending token from its first character.
//
// Input is read in chunks into one buffer that always ends in a NUL sentinel, so the lexers need
// no bounds checks: NUL is never valid where they look, and reaching it at the end of the buffer
// means "need more input" (Lex::kMore) unless the input is exhausted, in which case the input is
// truncated. A caller that gets kMore refills the buffer, keeping everything from a point where
// it can restart (the start of the current event), and lexes again from there.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <iterator>
#include <memory>
#include <string>
#include <string_view>

namespace bucketsim::json {

// How far the input has been read: lets the nlohmann-based header parser tell a truncated file
// from a malformed one, and the reader report an I/O error.
struct InputProgress {
  std::uint64_t bytes_read = 0;
  bool at_eof = false;
  int read_errno = 0;
  // FNV-1a (64 bit) of every byte read so far, hashed as each chunk arrives: a trace's digest
  // costs no second pass over the file.
  std::uint64_t fnv1a64 = 0xcbf29ce484222325ULL;
  // Called after each chunk with bytes_read (a progress display); unset: nothing.
  std::function<void(std::uint64_t bytes_read)> on_read;
};

// Continues an FNV-1a 64-bit hash over [data, data + n).
std::uint64_t Fnv1a64(std::uint64_t hash, const char* data, std::size_t n);

// A buffer over a file or a string, refilled in chunks. [begin(), end) holds the input not yet
// discarded; *end == '\0'.
class InputBuffer {
 public:
  static constexpr std::size_t kDefaultChunkBytes = std::size_t{1} << 20;
  // Refill reads at least as much as it keeps once it keeps this much.
  static constexpr std::size_t kLongRestartBytes = 4096;

  // Reads `file` (not owned) if not null, else `text`. Each refill reads `chunk_bytes` (more to
  // complete an event longer than kLongRestartBytes); the buffer holds twice that, and grows only
  // for such an event.
  InputBuffer(std::FILE* file, std::string_view text, std::size_t chunk_bytes,
              InputProgress& progress);

  const char* begin() const { return data_.get(); }

  // Discards the input before `keep`, moves the rest to the front (cur = begin()) and appends
  // what can be read. Returns false, and sets eof, when nothing more could be read.
  bool Refill(const char* keep);
  // Reads (and hashes) whatever input is left, without keeping it: what the parser stopped
  // before still counts in InputProgress::fnv1a64.
  void ReadRest();

  // nlohmann's position of the character at `p` (or of the end of input when p == end): 1-based
  // line, and the number of characters read on that line including it (0 for a newline).
  void LineColumn(const char* p, std::uint64_t& line, std::uint64_t& column) const;
  // The offset of `p` in the input.
  std::uint64_t Offset(const char* p) const {
    return discarded_ + static_cast<std::uint64_t>(p - data_.get());
  }

  const char* cur = nullptr;  // the next character to read
  const char* end = nullptr;  // the end of the buffered input, where a '\0' sentinel sits
  bool eof = false;           // nothing more can be read

 private:
  std::size_t Read(char* dst, std::size_t n);

  std::FILE* file_;
  std::string_view text_;
  std::size_t chunk_bytes_;
  InputProgress& progress_;
  std::unique_ptr<char[]> data_;
  std::size_t capacity_ = 0;  // bytes of data_, not counting the sentinel's
  // Line bookkeeping of the discarded input.
  std::uint64_t discarded_ = 0;        // bytes before begin()
  std::uint64_t discarded_lines_ = 0;  // newlines among them
  std::uint64_t line_start_ = 0;       // offset just after the last of them (0 if none)
};

// An input iterator over an InputBuffer, for nlohmann's parser (which reads the header through
// it and stops right after the '[' of "events"). The default-constructed iterator is the end.
class InputIterator {
 public:
  using iterator_category = std::input_iterator_tag;
  using value_type = char;
  using difference_type = std::ptrdiff_t;
  using pointer = const char*;
  using reference = const char&;

  InputIterator() = default;
  explicit InputIterator(InputBuffer* in) : in_(in) {}

  const char& operator*() const { return *in_->cur; }
  InputIterator& operator++() {
    ++in_->cur;
    return *this;
  }
  InputIterator operator++(int) {
    InputIterator old = *this;
    ++in_->cur;
    return old;
  }
  friend bool operator==(const InputIterator& a, const InputIterator& b) {
    if (a.in_ == nullptr) return b.in_ == nullptr || b.AtEnd();
    return b.in_ == nullptr ? a.AtEnd() : a.in_ == b.in_;
  }

 private:
  bool AtEnd() const { return in_->cur == in_->end && !in_->Refill(in_->cur); }
  InputBuffer* in_ = nullptr;
};

enum class Lex : std::uint8_t {
  kOk,
  kMore,   // ran into the end of the buffer: refill and lex again
  kError,  // see Scanner::error()
};

// Token kinds, for messages (nlohmann's names).
enum class Token : std::uint8_t {
  kNone,  // "no token expected"
  kString,
  kNumber,
  kTrue,
  kFalse,
  kNull,
  kBeginArray,
  kBeginObject,
  kEndArray,
  kEndObject,
  kColon,
  kComma,
  kEndOfInput,
  kLiteralOrValue,
};

struct Number {
  enum class Kind : std::uint8_t { kUnsigned, kInteger, kFloat };
  Kind kind = Kind::kUnsigned;
  std::uint64_t unsigned_value = 0;
  std::int64_t integer_value = 0;
  double float_value = 0;
};

struct ScanError {
  enum class Kind : std::uint8_t {
    kTruncated,  // the input ended: "unexpected end of input"
    kSyntax,     // text is nlohmann's, after "syntax error ": "while parsing object - ..."
    kOverflow,   // text: "number overflow parsing '1e999'"; nlohmann says where by `byte`
  };
  Kind kind = Kind::kSyntax;
  std::string text;
  std::uint64_t line = 0;
  std::uint64_t column = 0;
  std::uint64_t byte = 0;  // nlohmann's position: the offset just past the character in error
};

class Scanner {
 public:
  explicit Scanner(InputBuffer& in) : in_(in) {}

  static bool IsSpace(char c) { return c == ' ' || c == '\n' || c == '\r' || c == '\t'; }
  static const char* SkipSpace(const char* p) {
    while (IsSpace(*p)) ++p;
    return p;
  }

  // Each lexer starts at the token's first character (*p is '"', '-' or a digit, or a letter of
  // the literal) and on kOk leaves `p` just past the token.

  // A string; `out` views the buffer or, with escapes, scratch storage valid until the next call.
  Lex String(const char*& p, std::string_view& out) {
    const char* q = p + 1;
    while (kPlain[static_cast<unsigned char>(*q)]) ++q;
    if (*q == '"') {
      out = std::string_view(p + 1, static_cast<std::size_t>(q - p - 1));
      p = q + 1;
      return Lex::kOk;
    }
    return StringSlow(p, q, out);
  }

  // A number. A float that overflows a double is an error when `check_finite`, as in nlohmann's
  // parser (only a number taken as a value is checked).
  Lex NumberValue(const char*& p, Number& out, bool check_finite = true) {
    const char* q = p;
    bool negative = *q == '-';
    q += negative ? 1 : 0;
    const char* digits = q;
    std::uint64_t value = 0;
    if (*q == '0') {
      ++q;
    } else if (IsDigit(*q)) {
      do {
        value = value * 10 + static_cast<unsigned>(*q - '0');
        ++q;
      } while (IsDigit(*q));
    } else {
      return Fail(q, p, "invalid number; expected digit after '-'");
    }
    if (*q == '.' || *q == 'e' || *q == 'E' || q - digits > 19) {
      return NumberSlow(p, q, out, check_finite);
    }
    if (q == in_.end && !in_.eof) return Lex::kMore;  // more digits may follow
    if (!negative) {
      out.kind = Number::Kind::kUnsigned;
      out.unsigned_value = value;
    } else {
      if (value > (std::uint64_t{1} << 63)) return NumberSlow(p, q, out, check_finite);
      out.kind = Number::Kind::kInteger;
      out.integer_value = static_cast<std::int64_t>(std::uint64_t{0} - value);
    }
    p = q;
    return Lex::kOk;
  }

  // true, false or null.
  Lex Literal(const char*& p, Token& out);

  // Any one token (for nested values and messages); numbers are not checked for overflow.
  Lex AnyToken(const char*& p, Token& out);

  // Records a syntax error for the token at `p`, which is not what the grammar allows there:
  // "while parsing <context> - unexpected <token>; expected <expected>", or the token's own
  // lexical error. kMore if the token runs into the end of the buffer.
  Lex Unexpected(const char* p, std::string_view context, Token expected,
                 bool expected_after_lexical_error = true);

  // Completes the error of a lexer that returned kError, as nlohmann words it for a token that
  // failed where `context` was being parsed and `expected` was expected ("while parsing object
  // key - invalid literal; last read: 'x'; expected string literal"). Returns kError.
  Lex Context(std::string_view context, Token expected);

  // Skips one complete value of any kind starting at `p` (nested arrays and objects too), with
  // nlohmann's syntax checks and messages.
  Lex SkipValue(const char*& p);

  // The error behind the last kError.
  const ScanError& error() const { return error_; }

  static std::string_view TokenName(Token token);

 private:
  static bool IsDigit(char c) { return c >= '0' && c <= '9'; }
  static const std::array<bool, 256> kPlain;  // string bytes taken as they are

  Lex StringSlow(const char*& p, const char* q, std::string_view& out);
  Lex NumberSlow(const char*& p, const char* q, Number& out, bool check_finite);
  // A lexical error at `at` in the token that starts at `start`, or, when `at` is the end of the
  // buffer, kMore or a truncation.
  Lex Fail(const char* at, const char* start, std::string message);
  Lex EndOfBuffer(const char* at);
  void SetError(ScanError::Kind kind, const char* at, std::string text);

  InputBuffer& in_;
  ScanError error_;
  // A lexical error waiting for Context: the token's start, where it failed, and why.
  bool lexical_pending_ = false;
  const char* error_start_ = nullptr;
  const char* error_at_ = nullptr;
  std::string error_message_;
  std::string scratch_;
  std::string nesting_;  // SkipValue's stack: '[' or '{' per open container
};

}  // namespace bucketsim::json
