#include "tools/process/proc.h"

#include <dirent.h>
#include <fcntl.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {
namespace {

absl::Status ErrnoError(int err, const std::string& what) {
  const std::string message = absl::StrCat(what, ": ", std::strerror(err));
  if (err == ENOENT || err == ESRCH) return absl::NotFoundError(message);
  return absl::InternalError(message);
}

// The whole of a /proc file (whose size the kernel reports as 0).
absl::StatusOr<std::string> ReadProcFile(const std::string& path) {
  const int fd = open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return ErrnoError(errno, absl::StrCat("cannot open ", path));
  std::string text;
  char buf[4096];
  while (true) {
    const ssize_t n = read(fd, buf, sizeof(buf));
    if (n < 0 && errno == EINTR) continue;
    if (n < 0) {
      const int err = errno;
      close(fd);
      return ErrnoError(err, absl::StrCat("cannot read ", path));
    }
    if (n == 0) break;
    text.append(buf, static_cast<size_t>(n));
  }
  close(fd);
  return text;
}

std::string ProcPath(pid_t pid, absl::string_view file) {
  return absl::StrCat("/proc/", pid, "/", file);
}

}  // namespace

absl::StatusOr<std::string> StatusFieldFromText(absl::string_view text, absl::string_view name) {
  for (absl::string_view line : absl::StrSplit(text, '\n')) {
    if (absl::ConsumePrefix(&line, name) && absl::ConsumePrefix(&line, ":")) {
      return std::string(absl::StripAsciiWhitespace(line));
    }
  }
  return absl::NotFoundError(absl::StrCat("no field ", name));
}

absl::StatusOr<int64_t> KilobytesFromText(absl::string_view value) {
  absl::string_view v = absl::StripAsciiWhitespace(value);
  int64_t kb = 0;
  if (!absl::ConsumeSuffix(&v, " kB") || !absl::SimpleAtoi(v, &kb) || kb < 0 ||
      kb > INT64_MAX / 1024) {
    return absl::DataLossError(absl::StrCat("'", value, "' is not a size in kB"));
  }
  return kb * 1024;
}

absl::StatusOr<int64_t> CpuTicksFromStatText(absl::string_view text) {
  // "PID (COMM) STATE PPID ...": the command may hold anything, so the
  // fields are counted from its last closing parenthesis; after it come
  // state (field 3), ..., utime (14) and stime (15).
  const size_t paren = text.rfind(')');
  if (paren == absl::string_view::npos) {
    return absl::DataLossError("no command in parentheses");
  }
  const std::vector<absl::string_view> f =
      absl::StrSplit(text.substr(paren + 1), ' ', absl::SkipEmpty());
  int64_t utime = 0, stime = 0;
  if (f.size() < 13 || !absl::SimpleAtoi(f[11], &utime) || !absl::SimpleAtoi(f[12], &stime) ||
      utime < 0 || stime < 0) {
    return absl::DataLossError("no utime and stime where fields 14 and 15 should be");
  }
  return utime + stime;
}

absl::StatusOr<std::string> ProcStatusField(pid_t pid, absl::string_view name) {
  const std::string path = ProcPath(pid, "status");
  absl::StatusOr<std::string> text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<std::string> value = StatusFieldFromText(*text, name);
  if (!value.ok()) {
    return absl::Status(value.status().code(), absl::StrCat(path, ": ", value.status().message()));
  }
  return value;
}

absl::StatusOr<int64_t> ProcStatusBytes(pid_t pid, absl::string_view name) {
  absl::StatusOr<std::string> value = ProcStatusField(pid, name);
  if (!value.ok()) return value.status();
  absl::StatusOr<int64_t> bytes = KilobytesFromText(*value);
  if (!bytes.ok()) {
    return absl::DataLossError(
        absl::StrCat(ProcPath(pid, "status"), " ", name, ": ", bytes.status().message()));
  }
  return bytes;
}

absl::StatusOr<std::string> ProcAllowedCpus(pid_t pid) {
  return ProcStatusField(pid, "Cpus_allowed_list");
}

absl::StatusOr<absl::Duration> ProcCpuTime(pid_t pid) {
  const std::string path = ProcPath(pid, "stat");
  absl::StatusOr<std::string> text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  absl::StatusOr<int64_t> ticks = CpuTicksFromStatText(*text);
  if (!ticks.ok()) return absl::DataLossError(absl::StrCat(path, ": ", ticks.status().message()));
  static const long kTicksPerSecond = sysconf(_SC_CLK_TCK);
  return absl::Seconds(static_cast<double>(*ticks) / kTicksPerSecond);
}

absl::StatusOr<int> ProcThreadCount(pid_t pid) {
  const std::string path = ProcPath(pid, "task");
  DIR* d = opendir(path.c_str());
  if (d == nullptr) return ErrnoError(errno, absl::StrCat("cannot list ", path));
  int n = 0;
  while (const dirent* e = readdir(d)) n += e->d_name[0] != '.';
  closedir(d);
  return n;
}

absl::StatusOr<int64_t> SysctlInt(absl::string_view name) {
  for (absl::string_view part : absl::StrSplit(name, '.')) {
    const bool ok = !part.empty() && std::all_of(part.begin(), part.end(), [](char c) {
      return absl::ascii_isalnum(c) || c == '_' || c == '-';
    });
    if (!ok) {
      return absl::InvalidArgumentError(absl::StrCat("sysctl name '", name,
                                                     "': expected names joined by dots, e.g. "
                                                     "net.core.wmem_max"));
    }
  }
  const std::string path = absl::StrCat("/proc/sys/", absl::StrReplaceAll(name, {{".", "/"}}));
  absl::StatusOr<std::string> text = ReadProcFile(path);
  if (!text.ok()) return text.status();
  int64_t v = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(*text), &v)) {
    return absl::DataLossError(
        absl::StrCat(path, ": '", absl::StripAsciiWhitespace(*text), "' is not one integer"));
  }
  return v;
}

absl::StatusOr<std::string> SelfExecutable() {
  char buf[PATH_MAX];
  const ssize_t n = readlink("/proc/self/exe", buf, sizeof(buf));
  if (n < 0) return ErrnoError(errno, "cannot read /proc/self/exe");
  if (static_cast<size_t>(n) == sizeof(buf)) {
    return absl::InternalError("/proc/self/exe: path longer than PATH_MAX");
  }
  return std::string(buf, static_cast<size_t>(n));
}

}  // namespace ps
