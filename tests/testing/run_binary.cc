#include "testing/run_binary.h"

#include <sys/wait.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

namespace bucketsim::testing {
namespace {

std::string Quote(const std::string& arg) {
  std::string out = "'";
  for (char c : arg) out += c == '\'' ? std::string("'\\''") : std::string(1, c);
  return out + "'";
}

std::filesystem::path TempDir() {
  auto dir =
      std::filesystem::temp_directory_path() / ("bucketsim-test-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir);
  return dir;
}

}  // namespace

std::string ReadFile(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

std::string WriteTempFile(const std::string& name, const std::string& contents) {
  std::filesystem::path path = TempDir() / name;
  std::ofstream(path, std::ios::binary) << contents;
  return path.string();
}

namespace {

// `columns`: the COLUMNS the binary sees; empty (no width: whole table lines) unless a test asks
// for one, so that a COLUMNS in the environment running the tests changes no output.
BinaryResult RunWithPrefix(const std::string& prefix, const std::vector<std::string>& args,
                           const std::string& stdin_from = "", const std::string& columns = "") {
  static int counter = 0;
  std::filesystem::path dir = TempDir();
  std::string out_path = (dir / ("out" + std::to_string(counter))).string();
  std::string err_path = (dir / ("err" + std::to_string(counter++))).string();
  std::string command = "cd " + Quote(BUCKETSIM_SOURCE_DIR) + " && " + stdin_from +
                        "COLUMNS=" + Quote(columns) + " " + prefix + Quote(BUCKETSIM_BINARY);
  for (const std::string& arg : args) command += " " + Quote(arg);
  command += " >" + Quote(out_path) + " 2>" + Quote(err_path);
  if (stdin_from.empty()) command += " </dev/null";
  int status = std::system(command.c_str());
  BinaryResult result;
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  result.out = ReadFile(out_path);
  result.err = ReadFile(err_path);
  return result;
}

}  // namespace

BinaryResult RunBucketsim(const std::vector<std::string>& args) { return RunWithPrefix("", args); }

BinaryResult RunBucketsim(const std::vector<std::string>& args, const std::string& stdin_from) {
  return RunWithPrefix("", args, stdin_from);
}

BinaryResult RunBucketsimInColumns(std::size_t columns, const std::vector<std::string>& args) {
  return RunWithPrefix("", args, "", std::to_string(columns));
}

std::string WithoutMpi() {
#ifdef BUCKETSIM_WITHOUT_MPI
  return "built without MPI (-DBUCKETSIM_MPI=OFF): no mpirun jobs, no host backend";
#else
  return "";
#endif
}

BinaryResult RunBucketsimUnderMpi(int ranks, const std::vector<std::string>& args) {
  // Open MPI refuses root without --allow-run-as-root and more ranks than cores without
  // --oversubscribe; CI runs as root on two cores.
  std::string prefix = Quote(BUCKETSIM_MPIEXEC) + " --allow-run-as-root --oversubscribe -np " +
                       std::to_string(ranks) + " ";
  return RunWithPrefix(prefix, args);
}

}  // namespace bucketsim::testing
