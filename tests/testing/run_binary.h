// Runs the real `bucketsim` binary for end-to-end tests: arguments in, exit code and the two
// output streams back.
#pragma once

#include <string>
#include <vector>

namespace bucketsim::testing {

struct BinaryResult {
  int exit_code = -1;
  std::string out;
  std::string err;
};

// Runs BUCKETSIM_BINARY with `args` (each shell-quoted), from the source directory.
BinaryResult RunBucketsim(const std::vector<std::string>& args);
// The same with `stdin_from` (a shell command line ending in "| ") feeding its standard input.
BinaryResult RunBucketsim(const std::vector<std::string>& args, const std::string& stdin_from);
// Why a test of several ranks or of the host backend cannot run here: the build has no MPI
// (-DBUCKETSIM_MPI=OFF); empty where it can. Such a test starts with
//   if (auto why = testing::WithoutMpi(); !why.empty()) GTEST_SKIP() << why;
std::string WithoutMpi();
// Runs it under `mpirun -np ranks` (as root and oversubscribed where that needs flags).
BinaryResult RunBucketsimUnderMpi(int ranks, const std::vector<std::string>& args);
// With COLUMNS=columns, as in a terminal that wide (the others run with no width).
BinaryResult RunBucketsimInColumns(std::size_t columns, const std::vector<std::string>& args);
// A file under the test's temporary directory with the given contents; returns its path.
std::string WriteTempFile(const std::string& name, const std::string& contents);
std::string ReadFile(const std::string& path);

}  // namespace bucketsim::testing
