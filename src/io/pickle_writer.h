// A streaming writer of Python pickles, protocol 4, for files that Python (pickle.load), torch's
// _memory_viz.py and pytorch.org/memory_viz's own JavaScript unpickler read: the memory snapshot
// bucketsim writes (report/memory_viz_snapshot.h). It writes built-in types only (dict, list,
// tuple, str, int, float, bool, None) with the opcodes of reference/caching_allocator.md §5.3, and
// writes them as Python's pickle.dumps (the C pickler, _pickle.c) does, byte for byte: the same
// opcode for each value, the same batches of 1000 items per MARK ... SETITEMS / APPENDS, the same
// 64 KiB FRAMEs committed at the same places. Two things are the caller's, as they depend on
// object identity in Python: which values are memoized (Memoize after a str, an empty dict or
// list, or a tuple, as Python memoizes every one of those) and where a memoized value is referred
// to again (Get). A list whose size is not known in advance (streamed) is written as Python
// writes any list of two items or more; only a streamed list of exactly one item differs
// (MARK x APPENDS where Python writes x APPEND), which every reader reads the same.
//
// The writer keeps one frame (at most 64 KiB and the last value) in memory and writes it to the
// stream as it fills, so a file of any size is written in bounded memory.
#pragma once

#include <cstdint>
#include <optional>
#include <ostream>
#include <string>
#include <string_view>
#include <vector>

namespace bucketsim {

class PickleWriter {
 public:
  using MemoId = std::uint32_t;

  // Writes the PROTO header at once; Finish writes STOP and the last frame.
  explicit PickleWriter(std::ostream& out);
  PickleWriter(const PickleWriter&) = delete;
  PickleWriter& operator=(const PickleWriter&) = delete;

  // Values. In a dict, keys and values alternate: Key is a string value named for legibility.
  void None();
  void Bool(bool value);
  void Int(std::int64_t value);
  void UInt(std::uint64_t value);
  void Float(double value);
  void String(std::string_view value);
  void Key(std::string_view key) { String(key); }
  // The memoized value `id` again (BINGET or LONG_BINGET).
  void Get(MemoId id);

  // Containers: Begin*, their items, End*. `size` is the number of items (a dict's pairs) when
  // known, which lets the batches be Python's exactly; a list of unknown size may be streamed.
  void BeginDict(std::optional<std::size_t> size);
  void EndDict();
  void BeginList(std::optional<std::size_t> size);
  void EndList();
  void BeginTuple(std::size_t size);
  void EndTuple();

  // Memoizes the value just written and returns its id for Get: right after String, BeginDict or
  // BeginList (before their items, where Python memoizes them), or EndTuple.
  MemoId Memoize();

  // STOP, and the last frame out. Nothing may be written after it.
  void Finish();

  // Bytes handed to the stream so far.
  std::uint64_t bytes_written() const { return bytes_written_; }

 private:
  enum class Kind : std::uint8_t { kDict, kList, kTuple };
  struct Container {
    Kind kind;
    std::optional<std::size_t> size;  // items (a dict's pairs); unset: streamed
    std::size_t done = 0;             // items complete
    std::size_t batch = 0;            // items complete in the open batch
    bool marked = false;              // the open batch began with MARK
    bool in_value = false;            // a dict between its key and its value
  };

  // Before a value: commits a full frame (as Python's save() does first) and opens a batch.
  void BeginValue();
  // After a value: counts an item of the enclosing container.
  void EndValue();
  void CloseBatch(Container& c);
  void Op(std::uint8_t opcode) { frame_.push_back(static_cast<char>(opcode)); }
  void Raw(const void* data, std::size_t size);
  void CommitFrame(bool force);
  void Emit(std::string_view bytes);

  std::ostream& out_;
  std::string frame_;
  std::vector<Container> stack_;
  MemoId next_memo_ = 0;
  std::uint64_t bytes_written_ = 0;
  bool finished_ = false;
};

}  // namespace bucketsim
