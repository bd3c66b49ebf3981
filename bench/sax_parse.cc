// The baseline of issue 14's end-to-end target: nlohmann's SAX parser reading a file and doing
// nothing with what it parses (every callback returns true). bench/end_to_end.sh times it
// beside `bucketsim compare` on the same file: a compare should take no more than twice this.
//
//   bucketsim_sax_parse FILE
#include <cstdio>
#include <memory>
#include <string>

#include <nlohmann/json.hpp>

namespace {

// Every SAX event accepted and dropped.
struct NullHandler : nlohmann::json_sax<nlohmann::json> {
  bool null() override { return true; }
  bool boolean(bool) override { return true; }
  bool number_integer(number_integer_t) override { return true; }
  bool number_unsigned(number_unsigned_t) override { return true; }
  bool number_float(number_float_t, const string_t&) override { return true; }
  bool string(string_t&) override { return true; }
  bool binary(binary_t&) override { return true; }
  bool start_object(std::size_t) override { return true; }
  bool key(string_t&) override { return true; }
  bool end_object() override { return true; }
  bool start_array(std::size_t) override { return true; }
  bool end_array() override { return true; }
  bool parse_error(std::size_t position, const std::string&,
                   const nlohmann::detail::exception& e) override {
    std::fprintf(stderr, "byte %zu: %s\n", position, e.what());
    return false;
  }
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s FILE\n", argv[0]);
    return 2;
  }
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(argv[1], "rb"), &std::fclose);
  if (!file) {
    std::perror(argv[1]);
    return 2;
  }
  // The whole file in memory first: nlohmann's fastest input (contiguous characters; its FILE*
  // adapter calls fgetc per byte), so the baseline is the strictest one.
  std::string text;
  char chunk[1 << 16];
  std::size_t n = 0;
  while ((n = std::fread(chunk, 1, sizeof(chunk), file.get())) > 0) text.append(chunk, n);
  NullHandler handler;
  return nlohmann::json::sax_parse(text, &handler) ? 0 : 1;
}
