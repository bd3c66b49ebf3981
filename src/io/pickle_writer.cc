#include "io/pickle_writer.h"

#include <bit>
#include <cstring>

#include "core/status.h"

namespace bucketsim {
namespace {

// Opcodes (Python's Lib/pickle.py names; reference/caching_allocator.md §5.3).
constexpr std::uint8_t kProto = 0x80;
constexpr std::uint8_t kFrame = 0x95;
constexpr std::uint8_t kStop = '.';
constexpr std::uint8_t kMark = '(';
constexpr std::uint8_t kNone = 'N';
constexpr std::uint8_t kNewTrue = 0x88;
constexpr std::uint8_t kNewFalse = 0x89;
constexpr std::uint8_t kBinInt = 'J';
constexpr std::uint8_t kBinInt1 = 'K';
constexpr std::uint8_t kBinInt2 = 'M';
constexpr std::uint8_t kLong1 = 0x8a;
constexpr std::uint8_t kBinFloat = 'G';
constexpr std::uint8_t kShortBinUnicode = 0x8c;
constexpr std::uint8_t kBinUnicode = 'X';
constexpr std::uint8_t kEmptyDict = '}';
constexpr std::uint8_t kSetItem = 's';
constexpr std::uint8_t kSetItems = 'u';
constexpr std::uint8_t kEmptyList = ']';
constexpr std::uint8_t kAppend = 'a';
constexpr std::uint8_t kAppends = 'e';
constexpr std::uint8_t kEmptyTuple = ')';
constexpr std::uint8_t kTuple = 't';
constexpr std::uint8_t kTuple1 = 0x85;
constexpr std::uint8_t kMemoize = 0x94;
constexpr std::uint8_t kBinGet = 'h';
constexpr std::uint8_t kLongBinGet = 'j';

constexpr int kProtocol = 4;
// Python's Pickler: items per MARK ... SETITEMS/APPENDS, and the frame sizes (_BATCHSIZE,
// _Framer._FRAME_SIZE_TARGET, _FRAME_SIZE_MIN).
constexpr std::size_t kBatchSize = 1000;
constexpr std::size_t kFrameSizeTarget = 64 * 1024;
constexpr std::size_t kFrameSizeMin = 4;

// Little-endian bytes of an unsigned value, `width` of them.
void AppendLittleEndian(std::string& out, std::uint64_t value, int width) {
  for (int i = 0; i < width; ++i) out.push_back(static_cast<char>((value >> (8 * i)) & 0xff));
}

// Python's encode_long: the shortest two's-complement little-endian bytes of the value whose
// 64-bit pattern is `bits`, negative or not (an unsigned value of 2**63 or more is not).
std::string EncodeLong(std::uint64_t bits, bool negative) {
  const std::uint64_t magnitude = negative ? ~bits + 1 : bits;
  const int nbytes = (std::bit_width(magnitude) >> 3) + 1;  // at most 9
  std::string bytes;
  for (int i = 0; i < nbytes; ++i) {
    const std::uint8_t sign_fill = negative ? 0xff : 0x00;
    bytes.push_back(static_cast<char>(i < 8 ? (bits >> (8 * i)) & 0xff : sign_fill));
  }
  // A negative value one byte too long (-128: 80 ff -> 80), as encode_long trims it.
  if (negative && nbytes > 1 && static_cast<std::uint8_t>(bytes[nbytes - 1]) == 0xff &&
      (static_cast<std::uint8_t>(bytes[nbytes - 2]) & 0x80) != 0) {
    bytes.pop_back();
  }
  return bytes;
}

}  // namespace

PickleWriter::PickleWriter(std::ostream& out) : out_(out) {
  const char header[] = {static_cast<char>(kProto), static_cast<char>(kProtocol)};
  Emit(std::string_view(header, sizeof(header)));  // outside any frame, as Python writes it
  frame_.reserve(kFrameSizeTarget + 1024);
}

void PickleWriter::Raw(const void* data, std::size_t size) {
  frame_.append(static_cast<const char*>(data), size);
}

void PickleWriter::Emit(std::string_view bytes) {
  out_.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
  bytes_written_ += bytes.size();
}

void PickleWriter::CommitFrame(bool force) {
  if (frame_.size() < kFrameSizeTarget && !force) return;
  if (frame_.size() >= kFrameSizeMin) {
    std::string header(1, static_cast<char>(kFrame));
    AppendLittleEndian(header, frame_.size(), 8);
    Emit(header);
  }
  Emit(frame_);
  frame_.clear();
}

void PickleWriter::BeginValue() {
  BUCKETSIM_CHECK(!finished_);
  if (!stack_.empty()) {
    Container& c = stack_.back();
    const bool item_start = c.kind != Kind::kDict || !c.in_value;
    // A full batch closes when the next item begins: the last item's MEMOIZE comes first.
    if (item_start && c.batch == kBatchSize) CloseBatch(c);
    if (item_start && c.batch == 0 && !c.marked) {
      // MARK before each batch, except for a container of one item (APPEND, SETITEM) and a
      // tuple of up to 3 (TUPLE1..3), as _pickle.c's batch_list_exact / batch_dict_exact do.
      const bool mark =
          c.kind == Kind::kTuple ? *c.size > 3 && c.done == 0 : !(c.size && *c.size == 1);
      if (mark) {
        Op(kMark);
        c.marked = true;
      }
    }
  }
  // Python's save() commits a full frame before it writes anything of the next value.
  CommitFrame(false);
}

void PickleWriter::EndValue() {
  if (stack_.empty()) return;
  Container& c = stack_.back();
  if (c.kind == Kind::kDict && !c.in_value) {
    c.in_value = true;
    return;
  }
  c.in_value = false;
  ++c.done;
  if (c.kind != Kind::kTuple) ++c.batch;  // its batch closes at the next item or at the end
}

void PickleWriter::CloseBatch(Container& c) {
  const bool dict = c.kind == Kind::kDict;
  if (c.marked) {
    Op(dict ? kSetItems : kAppends);
  } else {
    BUCKETSIM_CHECK(c.batch == 1);
    Op(dict ? kSetItem : kAppend);
  }
  c.batch = 0;
  c.marked = false;
}

void PickleWriter::None() {
  BeginValue();
  Op(kNone);
  EndValue();
}

void PickleWriter::Bool(bool value) {
  BeginValue();
  Op(value ? kNewTrue : kNewFalse);
  EndValue();
}

void PickleWriter::Int(std::int64_t value) {
  BeginValue();
  if (value >= 0 && value <= 0xff) {
    Op(kBinInt1);
    frame_.push_back(static_cast<char>(value));
  } else if (value >= 0 && value <= 0xffff) {
    Op(kBinInt2);
    AppendLittleEndian(frame_, static_cast<std::uint64_t>(value), 2);
  } else if (value >= -0x80000000LL && value <= 0x7fffffffLL) {
    Op(kBinInt);
    AppendLittleEndian(frame_, static_cast<std::uint32_t>(static_cast<std::int32_t>(value)), 4);
  } else {
    const std::string bytes = EncodeLong(static_cast<std::uint64_t>(value), value < 0);
    Op(kLong1);
    frame_.push_back(static_cast<char>(bytes.size()));
    frame_ += bytes;
  }
  EndValue();
}

void PickleWriter::UInt(std::uint64_t value) {
  if (value <= static_cast<std::uint64_t>(INT64_MAX)) {
    Int(static_cast<std::int64_t>(value));
    return;
  }
  BeginValue();
  const std::string bytes = EncodeLong(value, false);
  Op(kLong1);
  frame_.push_back(static_cast<char>(bytes.size()));
  frame_ += bytes;
  EndValue();
}

void PickleWriter::Float(double value) {
  BeginValue();
  Op(kBinFloat);
  const auto bits = std::bit_cast<std::uint64_t>(value);
  for (int i = 7; i >= 0; --i) frame_.push_back(static_cast<char>((bits >> (8 * i)) & 0xff));
  EndValue();
}

void PickleWriter::String(std::string_view value) {
  BeginValue();
  const std::size_t n = value.size();
  BUCKETSIM_CHECK(n <= 0xffffffffULL);
  if (n <= 0xff) {
    Op(kShortBinUnicode);
    frame_.push_back(static_cast<char>(n));
    frame_ += value;
  } else if (n >= kFrameSizeTarget) {
    // Python writes a large string outside any frame, after ending the current one.
    CommitFrame(true);
    std::string header(1, static_cast<char>(kBinUnicode));
    AppendLittleEndian(header, n, 4);
    Emit(header);
    Emit(value);
  } else {
    Op(kBinUnicode);
    AppendLittleEndian(frame_, n, 4);
    frame_ += value;
  }
  EndValue();
}

void PickleWriter::Get(MemoId id) {
  BUCKETSIM_CHECK(id < next_memo_);
  BeginValue();
  if (id < 256) {
    Op(kBinGet);
    frame_.push_back(static_cast<char>(id));
  } else {
    Op(kLongBinGet);
    AppendLittleEndian(frame_, id, 4);
  }
  EndValue();
}

void PickleWriter::BeginDict(std::optional<std::size_t> size) {
  BeginValue();
  Op(kEmptyDict);
  stack_.push_back({Kind::kDict, size});
}

void PickleWriter::EndDict() {
  BUCKETSIM_CHECK(!stack_.empty() && stack_.back().kind == Kind::kDict && !stack_.back().in_value);
  Container& c = stack_.back();
  BUCKETSIM_CHECK(!c.size || c.done == *c.size);
  if (c.batch > 0) CloseBatch(c);
  // _pickle.c loops while a batch was full: after a multiple of 1000 pairs, an empty one.
  if (c.done > 0 && c.done % kBatchSize == 0) {
    Op(kMark);
    Op(kSetItems);
  }
  stack_.pop_back();
  EndValue();
}

void PickleWriter::BeginList(std::optional<std::size_t> size) {
  BeginValue();
  Op(kEmptyList);
  stack_.push_back({Kind::kList, size});
}

void PickleWriter::EndList() {
  BUCKETSIM_CHECK(!stack_.empty() && stack_.back().kind == Kind::kList);
  Container& c = stack_.back();
  BUCKETSIM_CHECK(!c.size || c.done == *c.size);
  if (c.batch > 0) CloseBatch(c);
  stack_.pop_back();
  EndValue();
}

void PickleWriter::BeginTuple(std::size_t size) {
  BeginValue();
  stack_.push_back({Kind::kTuple, size});
}

void PickleWriter::EndTuple() {
  BUCKETSIM_CHECK(!stack_.empty() && stack_.back().kind == Kind::kTuple);
  const Container c = stack_.back();
  BUCKETSIM_CHECK(c.done == *c.size);
  stack_.pop_back();
  if (*c.size == 0) {
    Op(kEmptyTuple);
  } else if (*c.size <= 3) {
    Op(static_cast<std::uint8_t>(kTuple1 + *c.size - 1));  // TUPLE1, TUPLE2, TUPLE3
  } else {
    Op(kTuple);
  }
  EndValue();
}

PickleWriter::MemoId PickleWriter::Memoize() {
  BUCKETSIM_CHECK(!finished_);
  Op(kMemoize);
  return next_memo_++;
}

void PickleWriter::Finish() {
  BUCKETSIM_CHECK(!finished_ && stack_.empty());
  Op(kStop);
  CommitFrame(true);
  finished_ = true;
}

}  // namespace bucketsim
