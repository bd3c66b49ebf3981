// Where a report came from: the tool (version, git sha), how it was run (argv, backend, memory
// model, host) and what it read (the trace's name and digest). Readers of a report use it to
// tell whether two reports are comparable; golden tests drop its volatile fields (host, argv,
// git_sha, tool_version, trace_path).
#pragma once

#include <string>
#include <vector>

#include "core/status.h"
#include "core/trace_header.h"

namespace bucketsim {

inline constexpr int kReportSchemaVersion = 1;

struct ReportContext {
  std::string tool_version;
  std::string git_sha;
  std::string backend = "sim";
  std::string memory_model = "exact";
  std::string time_profile = "none";  // the sim's time profile (--profile), by its name
  std::vector<std::string> argv;
  std::string host;
  std::string trace_path;
  std::string trace_name;    // file name without directories
  std::string trace_digest;  // "fnv1a64:0123456789abcdef" of the file's bytes
};

// Fills tool, host and argv; the trace fields are filled by `DescribeTrace`. With
// BUCKETSIM_DETERMINISTIC_CONTEXT=1 in the environment the host is left empty, the git sha is
// "deterministic" and argv[0] is "bucketsim", so that a report regenerates byte for byte on any
// machine and build (tools/regen-reports.sh).
ReportContext MakeReportContext(const std::vector<std::string>& argv);
bool DeterministicContext();
// The trace fields: the path as given, its file name and the digest the reader computed while
// it read the trace (TraceHeader::content_digest: no second pass over the file). Standard input
// ("-") is named "stdin" and carries no digest.
void DescribeTrace(const std::string& path, const TraceHeader& header, ReportContext& context);
// The same from the digest alone: a trace another process read (`sweep` under mpirun).
void DescribeTrace(const std::string& path, const std::string& content_digest,
                   ReportContext& context);

}  // namespace bucketsim
