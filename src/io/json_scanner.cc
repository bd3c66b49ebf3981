#include "io/json_scanner.h"

#include <algorithm>
#include <cerrno>
#include <charconv>
#include <clocale>
#include <cmath>
#include <cstdlib>
#include <cstring>
#include <system_error>

#include <fmt/format.h>

#if defined(__SSE2__)
#include <emmintrin.h>
#endif

namespace bucketsim::json {

// ---------------------------------------------------------------------------------------------
// InputBuffer

namespace {

// Runs on every byte of the input (std::count is not vectorised at -O2).
std::size_t CountNewlines(const char* p, const char* end) {
  std::size_t n = 0;
#if defined(__SSE2__)
  // Per byte lane, subtract the compare's -1 for each newline (up to 255 blocks at a time), then
  // sum the lanes.
  const __m128i newline = _mm_set1_epi8('\n');
  while (end - p >= 16) {
    __m128i counts = _mm_setzero_si128();
    for (int blocks = 0; blocks < 255 && end - p >= 16; ++blocks, p += 16) {
      __m128i chunk = _mm_loadu_si128(reinterpret_cast<const __m128i*>(p));
      counts = _mm_sub_epi8(counts, _mm_cmpeq_epi8(chunk, newline));
    }
    __m128i sums = _mm_sad_epu8(counts, _mm_setzero_si128());
    n += static_cast<std::size_t>(_mm_cvtsi128_si32(sums)) +
         static_cast<std::size_t>(_mm_cvtsi128_si32(_mm_srli_si128(sums, 8)));
  }
#endif
  for (; p < end; ++p) n += *p == '\n' ? 1 : 0;
  return n;
}

}  // namespace

InputBuffer::InputBuffer(std::FILE* file, std::string_view text, std::size_t chunk_bytes,
                         InputProgress& progress)
    : file_(file),
      text_(text),
      chunk_bytes_(std::max<std::size_t>(chunk_bytes, 1)),
      progress_(progress),
      data_(new char[2 * chunk_bytes_ + 1]),
      capacity_(2 * chunk_bytes_) {
  data_[0] = '\0';
  cur = end = data_.get();
}

std::uint64_t Fnv1a64(std::uint64_t hash, const char* data, std::size_t n) {
  const auto* bytes = reinterpret_cast<const unsigned char*>(data);
  for (std::size_t i = 0; i < n; ++i) {
    hash ^= bytes[i];
    hash *= 0x100000001b3ULL;
  }
  return hash;
}

std::size_t InputBuffer::Read(char* dst, std::size_t n) {
  if (file_ == nullptr) {
    n = std::min(n, text_.size());
    std::memcpy(dst, text_.data(), n);
    text_.remove_prefix(n);
    progress_.fnv1a64 = Fnv1a64(progress_.fnv1a64, dst, n);
    return n;
  }
  std::size_t got = std::fread(dst, 1, n, file_);
  if (got < n && std::ferror(file_) && progress_.read_errno == 0) {
    progress_.read_errno = errno != 0 ? errno : EIO;
  }
  progress_.fnv1a64 = Fnv1a64(progress_.fnv1a64, dst, got);
  return got;
}

void InputBuffer::ReadRest() {
  if (eof) return;
  // The buffer's content is no longer needed: read into it from the start.
  while (Read(data_.get(), capacity_) > 0) {
  }
  cur = end = data_.get();
  data_[0] = '\0';
  eof = true;
  progress_.at_eof = true;
}

bool InputBuffer::Refill(const char* keep) {
  char* data = data_.get();
  // Count the lines of what is discarded, for LineColumn.
  if (std::size_t lines = CountNewlines(data, keep); lines > 0) {
    discarded_lines_ += lines;
    const char* last = keep - 1;
    while (*last != '\n') --last;
    line_start_ = discarded_ + static_cast<std::uint64_t>(last + 1 - data);
  }
  discarded_ += static_cast<std::uint64_t>(keep - data);
  std::size_t kept = static_cast<std::size_t>(end - keep);
  std::memmove(data, keep, kept);
  // The caller lexes what is kept again: when that is long (one huge event), read as much again
  // as is kept, so that the work stays linear in the size of the event.
  std::size_t want = chunk_bytes_;
  if (kept >= kLongRestartBytes) want = std::max(want, kept);
  if (kept + want > capacity_) {
    std::size_t capacity = std::max(capacity_ * 2, kept + want);
    std::unique_ptr<char[]> bigger(new char[capacity + 1]);
    std::memcpy(bigger.get(), data, kept);
    data_ = std::move(bigger);
    capacity_ = capacity;
    data = data_.get();
  }
  std::size_t n = 0;
  if (!eof) n = Read(data + kept, want);
  cur = data;
  end = data + kept + n;
  data[kept + n] = '\0';
  if (n == 0) {
    eof = true;
    progress_.at_eof = true;
    return false;
  }
  progress_.bytes_read += n;
  if (progress_.on_read) progress_.on_read(progress_.bytes_read);
  return true;
}

void InputBuffer::LineColumn(const char* p, std::uint64_t& line, std::uint64_t& column) const {
  std::uint64_t lines = discarded_lines_;
  std::uint64_t start = line_start_;
  const char* data = data_.get();
  for (const char* q = data; q < p; ++q) {
    if (*q == '\n') {
      ++lines;
      start = discarded_ + static_cast<std::uint64_t>(q - data) + 1;
    }
  }
  if (p < end && *p == '\n') {  // nlohmann has counted the newline already
    line = lines + 2;
    column = 0;
    return;
  }
  line = lines + 1;
  column = discarded_ + static_cast<std::uint64_t>(p - data) - start + 1;
}

// ---------------------------------------------------------------------------------------------
// Scanner

namespace {

constexpr std::array<bool, 256> MakePlainTable() {
  std::array<bool, 256> table{};
  for (int c = 0x20; c < 0x80; ++c) table[c] = c != '"' && c != '\\';
  return table;
}

// nlohmann's message for a raw control character in a string.
std::string ControlCharacterMessage(unsigned char c) {
  static constexpr std::array<std::string_view, 32> kNames = {
      "NUL", "SOH", "STX", "ETX", "EOT", "ENQ", "ACK", "BEL", "BS",  "HT",  "LF",
      "VT",  "FF",  "CR",  "SO",  "SI",  "DLE", "DC1", "DC2", "DC3", "DC4", "NAK",
      "SYN", "ETB", "CAN", "EM",  "SUB", "ESC", "FS",  "GS",  "RS",  "US"};
  std::string_view alternative;
  switch (c) {
    case 0x08:
      alternative = " or \\b";
      break;
    case 0x09:
      alternative = " or \\t";
      break;
    case 0x0A:
      alternative = " or \\n";
      break;
    case 0x0C:
      alternative = " or \\f";
      break;
    case 0x0D:
      alternative = " or \\r";
      break;
    default:
      break;
  }
  return fmt::format(
      "invalid string: control character U+{:04X} ({}) must be escaped to \\u{:04X}{}", c,
      kNames[c], c, alternative);
}

// The four hex digits at `p`: their value, or -1 with `bad` at the first that is not one.
int Hex4(const char* p, const char*& bad) {
  int value = 0;
  for (int i = 0; i < 4; ++i) {
    char c = p[i];
    int digit;
    if (c >= '0' && c <= '9') {
      digit = c - '0';
    } else if (c >= 'A' && c <= 'F') {
      digit = c - 'A' + 10;
    } else if (c >= 'a' && c <= 'f') {
      digit = c - 'a' + 10;
    } else {
      bad = p + i;
      return -1;
    }
    value = value * 16 + digit;
  }
  return value;
}

void AppendUtf8(std::string& out, int cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out.push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

// strtod's value of a JSON number (correctly rounded, like from_chars); 1e999 is infinite and
// 1e-999 is 0, as nlohmann has them.
double ParseDouble(std::string_view text) {
  double d = 0;
  auto [ptr, ec] = std::from_chars(text.data(), text.data() + text.size(), d);
  if (ec == std::errc() && ptr == text.data() + text.size()) return d;
  std::string copy(text);
  const char* point = std::localeconv()->decimal_point;
  if (point != nullptr && point[0] != '.' && point[0] != '\0') {
    std::replace(copy.begin(), copy.end(), '.', point[0]);
  }
  return std::strtod(copy.c_str(), nullptr);
}

}  // namespace

const std::array<bool, 256> Scanner::kPlain = MakePlainTable();

std::string_view Scanner::TokenName(Token token) {
  switch (token) {
    case Token::kNone:
      return "<uninitialized>";
    case Token::kString:
      return "string literal";
    case Token::kNumber:
      return "number literal";
    case Token::kTrue:
      return "true literal";
    case Token::kFalse:
      return "false literal";
    case Token::kNull:
      return "null literal";
    case Token::kBeginArray:
      return "'['";
    case Token::kBeginObject:
      return "'{'";
    case Token::kEndArray:
      return "']'";
    case Token::kEndObject:
      return "'}'";
    case Token::kColon:
      return "':'";
    case Token::kComma:
      return "','";
    case Token::kEndOfInput:
      return "end of input";
    case Token::kLiteralOrValue:
      return "'[', '{', or a literal";
  }
  return "<unknown>";
}

void Scanner::SetError(ScanError::Kind kind, const char* at, std::string text) {
  error_.kind = kind;
  error_.text = std::move(text);
  in_.LineColumn(at, error_.line, error_.column);
  error_.byte = in_.Offset(at) + 1;
}

Lex Scanner::EndOfBuffer(const char* at) {
  if (!in_.eof) return Lex::kMore;
  lexical_pending_ = false;
  SetError(ScanError::Kind::kTruncated, at, "");
  return Lex::kError;
}

Lex Scanner::Fail(const char* at, const char* start, std::string message) {
  if (at == in_.end) return EndOfBuffer(at);
  lexical_pending_ = true;
  error_start_ = start;
  error_at_ = at;
  error_message_ = std::move(message);
  return Lex::kError;
}

Lex Scanner::Context(std::string_view context, Token expected) {
  if (!lexical_pending_) return Lex::kError;  // a truncation or an overflow: complete already
  lexical_pending_ = false;
  // nlohmann's "last read": the token so far, control characters escaped.
  std::string token;
  for (const char* p = error_start_; p <= error_at_ && p < in_.end; ++p) {
    auto c = static_cast<unsigned char>(*p);
    if (c <= 0x1F) {
      token += fmt::format("<U+{:04X}>", c);
    } else {
      token.push_back(static_cast<char>(c));
    }
  }
  std::string text =
      fmt::format("while parsing {} - {}; last read: '{}'", context, error_message_, token);
  if (expected != Token::kNone) text += fmt::format("; expected {}", TokenName(expected));
  SetError(ScanError::Kind::kSyntax, error_at_, std::move(text));
  return Lex::kError;
}

Lex Scanner::StringSlow(const char*& p, const char* q, std::string_view& out) {
  const char* start = p;
  scratch_.assign(p + 1, q);
  for (;;) {
    auto c = static_cast<unsigned char>(*q);
    if (kPlain[c]) {
      const char* run = q;
      while (kPlain[static_cast<unsigned char>(*q)]) ++q;
      scratch_.append(run, q);
      continue;
    }
    if (c == '"') {
      out = scratch_;
      p = q + 1;
      return Lex::kOk;
    }
    if (c == '\\') {
      const char* e = q + 1;
      switch (*e) {
        case '"':
          scratch_.push_back('"');
          break;
        case '\\':
          scratch_.push_back('\\');
          break;
        case '/':
          scratch_.push_back('/');
          break;
        case 'b':
          scratch_.push_back('\b');
          break;
        case 'f':
          scratch_.push_back('\f');
          break;
        case 'n':
          scratch_.push_back('\n');
          break;
        case 'r':
          scratch_.push_back('\r');
          break;
        case 't':
          scratch_.push_back('\t');
          break;
        case 'u': {
          constexpr const char* kHex = "invalid string: '\\u' must be followed by 4 hex digits";
          constexpr const char* kHigh =
              "invalid string: surrogate U+D800..U+DBFF must be followed by U+DC00..U+DFFF";
          const char* h = e + 1;
          const char* bad = nullptr;
          int cp = Hex4(h, bad);
          if (cp < 0) return Fail(bad, start, kHex);
          h += 4;
          if (cp >= 0xD800 && cp <= 0xDBFF) {
            if (h[0] != '\\') return Fail(h, start, kHigh);
            if (h[1] != 'u') return Fail(h + 1, start, kHigh);
            int low = Hex4(h + 2, bad);
            if (low < 0) return Fail(bad, start, kHex);
            if (low < 0xDC00 || low > 0xDFFF) return Fail(h + 5, start, kHigh);
            cp = 0x10000 + ((cp - 0xD800) << 10) + (low - 0xDC00);
            h += 6;
          } else if (cp >= 0xDC00 && cp <= 0xDFFF) {
            return Fail(h - 1, start,
                        "invalid string: surrogate U+DC00..U+DFFF must follow U+D800..U+DBFF");
          }
          AppendUtf8(scratch_, cp);
          q = h;
          continue;
        }
        default:
          return Fail(e, start, "invalid string: forbidden character after backslash");
      }
      q = e + 1;
      continue;
    }
    if (c < 0x20) {
      if (q == in_.end) return EndOfBuffer(q);
      return Fail(q, start, ControlCharacterMessage(c));
    }
    // A multi-byte UTF-8 sequence: the ranges of RFC 3629, as nlohmann checks them.
    int follow = 0;
    unsigned char lo = 0x80;
    unsigned char hi = 0xBF;
    if (c >= 0xC2 && c <= 0xDF) {
      follow = 1;
    } else if (c == 0xE0) {
      follow = 2;
      lo = 0xA0;
    } else if ((c >= 0xE1 && c <= 0xEC) || c == 0xEE || c == 0xEF) {
      follow = 2;
    } else if (c == 0xED) {
      follow = 2;
      hi = 0x9F;
    } else if (c == 0xF0) {
      follow = 3;
      lo = 0x90;
    } else if (c >= 0xF1 && c <= 0xF3) {
      follow = 3;
    } else if (c == 0xF4) {
      follow = 3;
      hi = 0x8F;
    } else {
      return Fail(q, start, "invalid string: ill-formed UTF-8 byte");
    }
    for (int i = 1; i <= follow; ++i) {
      auto b = static_cast<unsigned char>(q[i]);
      if (b < lo || b > hi) return Fail(q + i, start, "invalid string: ill-formed UTF-8 byte");
      lo = 0x80;
      hi = 0xBF;
    }
    scratch_.append(q, q + follow + 1);
    q += follow + 1;
  }
}

Lex Scanner::NumberSlow(const char*& p, const char* q, Number& out, bool check_finite) {
  const char* start = p;
  bool is_float = false;
  if (*q == '.') {
    ++q;
    if (!IsDigit(*q)) return Fail(q, start, "invalid number; expected digit after '.'");
    while (IsDigit(*q)) ++q;
    is_float = true;
  }
  if (*q == 'e' || *q == 'E') {
    ++q;
    if (*q == '+' || *q == '-') {
      ++q;
      if (!IsDigit(*q)) return Fail(q, start, "invalid number; expected digit after exponent sign");
    } else if (!IsDigit(*q)) {
      return Fail(q, start, "invalid number; expected '+', '-', or digit after exponent");
    }
    while (IsDigit(*q)) ++q;
    is_float = true;
  }
  if (q == in_.end && !in_.eof) return Lex::kMore;  // more digits may follow
  std::string_view text(start, static_cast<std::size_t>(q - start));
  if (!is_float) {
    // An integer of many digits, or a negative one: as strtoull / strtoll would have it.
    bool negative = text[0] == '-';
    std::uint64_t value = 0;
    bool overflow = false;
    for (char c : text.substr(negative ? 1 : 0)) {
      overflow = overflow || __builtin_mul_overflow(value, 10u, &value) ||
                 __builtin_add_overflow(value, static_cast<unsigned>(c - '0'), &value);
    }
    if (!overflow && !negative) {
      out.kind = Number::Kind::kUnsigned;
      out.unsigned_value = value;
      p = q;
      return Lex::kOk;
    }
    if (!overflow && value <= (std::uint64_t{1} << 63)) {
      out.kind = Number::Kind::kInteger;
      out.integer_value = static_cast<std::int64_t>(std::uint64_t{0} - value);
      p = q;
      return Lex::kOk;
    }
  }
  out.kind = Number::Kind::kFloat;
  out.float_value = ParseDouble(text);
  if (check_finite && !std::isfinite(out.float_value)) {
    lexical_pending_ = false;
    SetError(ScanError::Kind::kOverflow, q - 1, fmt::format("number overflow parsing '{}'", text));
    return Lex::kError;
  }
  p = q;
  return Lex::kOk;
}

Lex Scanner::Literal(const char*& p, Token& out) {
  std::string_view literal;
  switch (*p) {
    case 't':
      literal = "true";
      out = Token::kTrue;
      break;
    case 'f':
      literal = "false";
      out = Token::kFalse;
      break;
    default:
      literal = "null";
      out = Token::kNull;
      break;
  }
  for (std::size_t i = 1; i < literal.size(); ++i) {
    if (p[i] != literal[i]) return Fail(p + i, p, "invalid literal");
  }
  p += literal.size();
  return Lex::kOk;
}

Lex Scanner::AnyToken(const char*& p, Token& out) {
  switch (*p) {
    case '[':
      out = Token::kBeginArray;
      ++p;
      return Lex::kOk;
    case ']':
      out = Token::kEndArray;
      ++p;
      return Lex::kOk;
    case '{':
      out = Token::kBeginObject;
      ++p;
      return Lex::kOk;
    case '}':
      out = Token::kEndObject;
      ++p;
      return Lex::kOk;
    case ':':
      out = Token::kColon;
      ++p;
      return Lex::kOk;
    case ',':
      out = Token::kComma;
      ++p;
      return Lex::kOk;
    case 't':
    case 'f':
    case 'n':
      return Literal(p, out);
    case '"': {
      out = Token::kString;
      std::string_view ignored;
      return String(p, ignored);
    }
    case '-':
    case '0':
    case '1':
    case '2':
    case '3':
    case '4':
    case '5':
    case '6':
    case '7':
    case '8':
    case '9': {
      out = Token::kNumber;
      Number ignored;
      return NumberValue(p, ignored, /*check_finite=*/false);
    }
    case '\0':
      if (p == in_.end) return EndOfBuffer(p);
      out = Token::kEndOfInput;  // as nlohmann reads a NUL byte
      ++p;
      return Lex::kOk;
    default:
      return Fail(p, p, "invalid literal");
  }
}

Lex Scanner::Unexpected(const char* p, std::string_view context, Token expected,
                        bool expected_after_lexical_error) {
  const char* q = p;
  Token token = Token::kNone;
  Lex r = AnyToken(q, token);
  if (r == Lex::kMore) return r;
  if (r == Lex::kError)
    return Context(context, expected_after_lexical_error ? expected : Token::kNone);
  std::string text = fmt::format("while parsing {} - unexpected {}", context, TokenName(token));
  if (expected != Token::kNone) text += fmt::format("; expected {}", TokenName(expected));
  SetError(ScanError::Kind::kSyntax, q - 1, std::move(text));
  // nlohmann reads one character past a number and "ungets" it; ungetting a newline leaves it
  // at column 0 of the number's line.
  if (token == Token::kNumber && q < in_.end && *q == '\n') error_.column = 0;
  return Lex::kError;
}

Lex Scanner::SkipValue(const char*& pp) {
  nesting_.clear();
  const char* p = pp;
  // After '{' or ',' in an object: a key and its colon, up to the member's value.
  auto member = [this, &p]() -> Lex {
    if (*p != '"') return Unexpected(p, "object key", Token::kString);
    std::string_view key;
    Lex r = String(p, key);
    if (r != Lex::kOk) return r == Lex::kError ? Context("object key", Token::kString) : r;
    p = SkipSpace(p);
    if (*p != ':') return Unexpected(p, "object separator", Token::kColon);
    p = SkipSpace(p + 1);
    return Lex::kOk;
  };
  for (;;) {
    // `p` is at a value.
    const char* start = p;
    Token token = Token::kNone;
    Lex r;
    if (*p == '-' || IsDigit(*p)) {
      Number number;
      token = Token::kNumber;
      r = NumberValue(p, number, /*check_finite=*/true);
    } else {
      r = AnyToken(p, token);
    }
    if (r == Lex::kMore) return r;
    if (r == Lex::kError) return Context("value", Token::kNone);
    switch (token) {
      case Token::kBeginObject:
        p = SkipSpace(p);
        if (*p == '}') {
          ++p;
          break;
        }
        if (Lex m = member(); m != Lex::kOk) return m;
        nesting_.push_back('{');
        continue;
      case Token::kBeginArray:
        p = SkipSpace(p);
        if (*p == ']') {
          ++p;
          break;
        }
        nesting_.push_back('[');
        continue;
      case Token::kString:
      case Token::kNumber:
      case Token::kTrue:
      case Token::kFalse:
      case Token::kNull:
        break;
      default:
        return Unexpected(start, "value", Token::kLiteralOrValue,
                          /*expected_after_lexical_error=*/false);
    }
    // A value is complete: close the containers it completes.
    for (;;) {
      if (nesting_.empty()) {
        pp = p;
        return Lex::kOk;
      }
      p = SkipSpace(p);
      bool array = nesting_.back() == '[';
      if (*p == ',') {
        p = SkipSpace(p + 1);
        if (!array) {
          if (Lex m = member(); m != Lex::kOk) return m;
        }
        break;  // to the next value
      }
      if (*p == (array ? ']' : '}')) {
        ++p;
        nesting_.pop_back();
        continue;
      }
      return array ? Unexpected(p, "array", Token::kEndArray)
                   : Unexpected(p, "object", Token::kEndObject);
    }
  }
}

}  // namespace bucketsim::json
