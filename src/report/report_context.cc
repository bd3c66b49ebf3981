#include "report/report_context.h"

#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <memory>
#include <vector>

#include <fmt/format.h>

namespace bucketsim {

ReportContext MakeReportContext(const std::vector<std::string>& argv) {
  ReportContext context;
  context.tool_version = BUCKETSIM_VERSION;
  context.git_sha = BUCKETSIM_GIT_SHA;
  context.argv = argv;
  char host[256] = {};
  if (gethostname(host, sizeof(host) - 1) == 0) context.host = host;
  return context;
}

Status DescribeTrace(const std::string& path, ReportContext& context) {
  context.trace_path = path;
  if (path == "-") {
    context.trace_name = "stdin";
    context.trace_digest = "none (read from standard input)";
    return Status::Ok();
  }
  context.trace_name = std::filesystem::path(path).filename().string();
  std::unique_ptr<std::FILE, int (*)(std::FILE*)> file(std::fopen(path.c_str(), "rb"),
                                                       &std::fclose);
  if (!file) return IoError(fmt::format("cannot open '{}': {}", path, std::strerror(errno)));
  // FNV-1a, 64 bit: enough to tell two traces apart, no dependency.
  std::uint64_t hash = 0xcbf29ce484222325ULL;
  std::vector<unsigned char> buffer(1 << 20);
  std::size_t n = 0;
  while ((n = std::fread(buffer.data(), 1, buffer.size(), file.get())) > 0) {
    for (std::size_t i = 0; i < n; ++i) {
      hash ^= buffer[i];
      hash *= 0x100000001b3ULL;
    }
  }
  if (std::ferror(file.get())) return IoError(fmt::format("cannot read '{}'", path));
  context.trace_digest = fmt::format("fnv1a64:{:016x}", hash);
  return Status::Ok();
}

}  // namespace bucketsim
