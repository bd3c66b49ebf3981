// PickleWriter against Python's own pickler: the bytes of pickle.dumps(OBJ, protocol=4) from the
// host's /usr/bin/python3 (3.11.2, the C pickler), pasted below. Small objects are compared
// byte for byte; larger ones (batches, several frames, LONG_BINGET, a string written outside the
// frames) by length and FNV-1a-64 of the bytes. To regenerate, for each OBJ below:
//   python3 -c 'import pickle; b = pickle.dumps(OBJ, protocol=4); print(len(b), b.hex())'
// and for FNV-1a-64:  h = 0xcbf29ce484222325; for x in b: h = ((h ^ x) * 0x100000001b3) % 2**64
// Each test builds OBJ with the same memoization Python applies (every str, dict, list and
// tuple, once) and the same sharing (an object saved twice is a memo reference the second time).
#include "io/pickle_writer.h"

#include <cstdint>
#include <sstream>
#include <string>

#include <gtest/gtest.h>

namespace bucketsim {
namespace {

template <std::size_t N>
std::string Golden(const char (&bytes)[N]) {
  return std::string(bytes, N - 1);
}

std::uint64_t Fnv1a64(const std::string& bytes) {
  std::uint64_t h = 0xcbf29ce484222325ULL;
  for (char c : bytes) {
    h ^= static_cast<std::uint8_t>(c);
    h *= 0x100000001b3ULL;
  }
  return h;
}

// A list of memoized strings, as Python pickles a list of str.
void MemoizedString(PickleWriter& w, std::string_view s) {
  w.String(s);
  w.Memoize();
}

TEST(PickleWriter, IntsUseTheSmallestOpcodeAsPythonDoes) {
  // OBJ = [0, 255, 256, 65535, 65536, -1, -128, -129, 2**31-1, 2**31, -2**31, -2**31-1, 2**32,
  //        2**44+512, 2**63-1, -2**63, 2**64-1]
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(17);
  w.Memoize();
  for (std::int64_t v :
       {std::int64_t{0}, std::int64_t{255}, std::int64_t{256}, std::int64_t{65535},
        std::int64_t{65536}, std::int64_t{-1}, std::int64_t{-128}, std::int64_t{-129},
        std::int64_t{2147483647}, std::int64_t{2147483648}, std::int64_t{-2147483648LL},
        std::int64_t{-2147483649LL}, std::int64_t{4294967296LL}, std::int64_t{(1LL << 44) + 512},
        INT64_MAX, INT64_MIN}) {
    w.Int(v);
  }
  w.UInt(UINT64_MAX);
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str(),
            Golden("\x80\x04\x95\x69\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x4b\x00\x4b\xff\x4d"
                   "\x00\x01\x4d\xff\xff\x4a\x00\x00\x01\x00\x4a\xff\xff\xff\xff\x4a\x80\xff\xff"
                   "\xff\x4a\x7f\xff\xff\xff\x4a\xff\xff\xff\x7f\x8a\x05\x00\x00\x00\x80\x00\x4a"
                   "\x00\x00\x00\x80\x8a\x05\xff\xff\xff\x7f\xff\x8a\x05\x00\x00\x00\x00\x01\x8a"
                   "\x06\x00\x02\x00\x00\x00\x10\x8a\x08\xff\xff\xff\xff\xff\xff\xff\x7f\x8a\x08"
                   "\x00\x00\x00\x00\x00\x00\x00\x80\x8a\x09\xff\xff\xff\xff\xff\xff\xff\xff\x00"
                   "\x65\x2e"));
}

TEST(PickleWriter, ScalarsAsPythonWritesThem) {
  // OBJ = [None, True, False, 0.5, -1e300]
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(5);
  w.Memoize();
  w.None();
  w.Bool(true);
  w.Bool(false);
  w.Float(0.5);
  w.Float(-1e300);
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str(),
            Golden("\x80\x04\x95\x1a\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x4e\x88\x89\x47\x3f"
                   "\xe0\x00\x00\x00\x00\x00\x00\x47\xfe\x37\xe4\x3c\x88\x00\x75\x9c\x65\x2e"));
}

TEST(PickleWriter, SnapshotEventDictAsPythonWritesIt) {
  // OBJ = {"action": "alloc", "addr": 4294967296, "size": 512, "stream": 0}
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginDict(4);
  w.Memoize();
  MemoizedString(w, "action");
  MemoizedString(w, "alloc");
  MemoizedString(w, "addr");
  w.UInt(4294967296ULL);
  MemoizedString(w, "size");
  w.Int(512);
  MemoizedString(w, "stream");
  w.Int(0);
  w.EndDict();
  w.Finish();
  EXPECT_EQ(out.str(),
            Golden("\x80\x04\x95\x39\x00\x00\x00\x00\x00\x00\x00\x7d\x94\x28\x8c\x06\x61\x63\x74"
                   "\x69\x6f\x6e\x94\x8c\x05\x61\x6c\x6c\x6f\x63\x94\x8c\x04\x61\x64\x64\x72\x94"
                   "\x8a\x05\x00\x00\x00\x00\x01\x8c\x04\x73\x69\x7a\x65\x94\x4d\x00\x02\x8c\x06"
                   "\x73\x74\x72\x65\x61\x6d\x94\x4b\x00\x75\x2e"));
}

TEST(PickleWriter, TuplesOfEverySize) {
  // OBJ = [(), (1,), (0, 0), (1, 2, 3), (1, 2, 3, 4)]
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(5);
  w.Memoize();
  w.BeginTuple(0);
  w.EndTuple();  // the empty tuple is not memoized
  for (std::size_t n = 1; n <= 4; ++n) {
    w.BeginTuple(n);
    for (std::size_t i = 0; i < n; ++i) w.Int(n == 2 ? 0 : static_cast<std::int64_t>(i + 1));
    w.EndTuple();
    w.Memoize();
  }
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str(),
            Golden("\x80\x04\x95\x23\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x29\x4b\x01\x85\x94"
                   "\x4b\x00\x4b\x00\x86\x94\x4b\x01\x4b\x02\x4b\x03\x87\x94\x28\x4b\x01\x4b\x02"
                   "\x4b\x03\x4b\x04\x74\x94\x65\x2e"));
}

TEST(PickleWriter, OneItemAndEmptyContainers) {
  {
    // OBJ = [7]: APPEND, no MARK.
    std::ostringstream out;
    PickleWriter w(out);
    w.BeginList(1);
    w.Memoize();
    w.Int(7);
    w.EndList();
    w.Finish();
    EXPECT_EQ(out.str(),
              Golden("\x80\x04\x95\x06\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x4b\x07\x61\x2e"));
  }
  {
    // OBJ = [{}, []]
    std::ostringstream out;
    PickleWriter w(out);
    w.BeginList(2);
    w.Memoize();
    w.BeginDict(0);
    w.Memoize();
    w.EndDict();
    w.BeginList(0);
    w.Memoize();
    w.EndList();
    w.EndList();
    w.Finish();
    EXPECT_EQ(out.str(), Golden("\x80\x04\x95\x09\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x7d"
                                "\x94\x5d\x94\x65\x2e"));
  }
}

TEST(PickleWriter, SharedObjectsAreMemoReferences) {
  // f = {"name": "x", "filename": "f", "line": 3}; frames = [f]; OBJ = [frames, frames, f]
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(3);
  w.Memoize();
  w.BeginList(1);
  const PickleWriter::MemoId frames = w.Memoize();
  w.BeginDict(3);
  const PickleWriter::MemoId f = w.Memoize();
  MemoizedString(w, "name");
  MemoizedString(w, "x");
  MemoizedString(w, "filename");
  MemoizedString(w, "f");
  MemoizedString(w, "line");
  w.Int(3);
  w.EndDict();
  w.EndList();
  w.Get(frames);
  w.Get(f);
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str(),
            Golden("\x80\x04\x95\x33\x00\x00\x00\x00\x00\x00\x00\x5d\x94\x28\x5d\x94\x7d\x94\x28"
                   "\x8c\x04\x6e\x61\x6d\x65\x94\x8c\x01\x78\x94\x8c\x08\x66\x69\x6c\x65\x6e\x61"
                   "\x6d\x65\x94\x8c\x01\x66\x94\x8c\x04\x6c\x69\x6e\x65\x94\x4b\x03\x75\x61\x68"
                   "\x01\x68\x02\x65\x2e"));
}

TEST(PickleWriter, StringsShortLongAndUtf8) {
  // OBJ = ["", "abc", "\u00e9", "x" * 300]  (336 bytes)
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(4);
  w.Memoize();
  MemoizedString(w, "");
  MemoizedString(w, "abc");
  MemoizedString(w, "\xc3\xa9");
  MemoizedString(w, std::string(300, 'x'));
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str().size(), 336u);
  EXPECT_EQ(Fnv1a64(out.str()), 0x19173566331ac50aULL);
}

TEST(PickleWriter, BatchesOfAThousandAsTheCPicklerWritesThem) {
  // OBJ = [list(range(2500)), {str(i): i for i in range(1001)},
  //        {str(i): i for i in range(1000)}]  (24558 bytes): a last batch of one pair is
  // MARK ... SETITEMS, and a dict of a multiple of 1000 pairs ends with an empty batch.
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(3);
  w.Memoize();
  w.BeginList(2500);
  w.Memoize();
  for (int i = 0; i < 2500; ++i) w.Int(i);
  w.EndList();
  for (int n : {1001, 1000}) {
    w.BeginDict(static_cast<std::size_t>(n));
    w.Memoize();
    for (int i = 0; i < n; ++i) {
      MemoizedString(w, std::to_string(i));
      w.Int(i);
    }
    w.EndDict();
  }
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str().size(), 24558u);
  EXPECT_EQ(Fnv1a64(out.str()), 0x790fe058e73ac2b9ULL);
}

TEST(PickleWriter, FramesOf64KiBWhereThePicklerCommitsThem) {
  {
    // OBJ = [str(i) for i in range(30000)]  (228991 bytes, four frames)
    std::ostringstream out;
    PickleWriter w(out);
    w.BeginList(30000);
    w.Memoize();
    for (int i = 0; i < 30000; ++i) MemoizedString(w, std::to_string(i));
    w.EndList();
    w.Finish();
    EXPECT_EQ(out.str().size(), 228991u);
    EXPECT_EQ(Fnv1a64(out.str()), 0xb4435d9062f49046ULL);
    EXPECT_EQ(w.bytes_written(), 228991u);
  }
  {
    // OBJ = [(i, i) for i in range(30000)]  (239589 bytes): a frame is committed before the
    // next value, not between a tuple's items and its TUPLE2.
    std::ostringstream out;
    PickleWriter w(out);
    w.BeginList(30000);
    w.Memoize();
    for (int i = 0; i < 30000; ++i) {
      w.BeginTuple(2);
      w.Int(i);
      w.Int(i);
      w.EndTuple();
      w.Memoize();
    }
    w.EndList();
    w.Finish();
    EXPECT_EQ(out.str().size(), 239589u);
    EXPECT_EQ(Fnv1a64(out.str()), 0xa5724052ff221873ULL);
  }
}

TEST(PickleWriter, StreamedListIsTheSameAsAKnownOne) {
  // The device trace is streamed: its size is not known when it begins.
  // OBJ = [str(i) for i in range(30000)], as above.
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(std::nullopt);
  w.Memoize();
  for (int i = 0; i < 30000; ++i) MemoizedString(w, std::to_string(i));
  w.EndList();
  w.Finish();
  EXPECT_EQ(Fnv1a64(out.str()), 0xb4435d9062f49046ULL);
}

TEST(PickleWriter, LongBinGetBeyond256MemoEntries) {
  // l = [str(i) for i in range(300)]; OBJ = l + [l[299]] * 3  (1721 bytes)
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(303);
  w.Memoize();
  PickleWriter::MemoId last = 0;
  for (int i = 0; i < 300; ++i) {
    w.String(std::to_string(i));
    last = w.Memoize();
  }
  for (int i = 0; i < 3; ++i) w.Get(last);
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str().size(), 1721u);
  EXPECT_EQ(Fnv1a64(out.str()), 0x4f37c609619d8a57ULL);
}

TEST(PickleWriter, LargeStringOutsideTheFrames) {
  // OBJ = ["a", "y" * 70000, "b"]  (70039 bytes)
  std::ostringstream out;
  PickleWriter w(out);
  w.BeginList(3);
  w.Memoize();
  MemoizedString(w, "a");
  MemoizedString(w, std::string(70000, 'y'));
  MemoizedString(w, "b");
  w.EndList();
  w.Finish();
  EXPECT_EQ(out.str().size(), 70039u);
  EXPECT_EQ(Fnv1a64(out.str()), 0x2b375107f6e42108ULL);
}

}  // namespace
}  // namespace bucketsim
