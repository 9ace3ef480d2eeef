// UnixSocketDir: a private folder (mode 0700) under the test's TEST_TMPDIR
// for unix sockets, removed with its contents on destruction.
//
// A socket path holds at most 107 bytes and Bazel's TEST_TMPDIR is often
// longer than that, so paths() go through a short symbolic link
// /tmp/ps-sock-XXXXXX to the folder when needed; the folder itself (and so
// its mode and owner, which the servers check) stays under TEST_TMPDIR.
// Not thread-safe to create; the paths are plain strings.
#ifndef PS_TESTS_UNIX_SOCKET_DIR_H_
#define PS_TESTS_UNIX_SOCKET_DIR_H_

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/string_view.h"
#include "gtest/gtest.h"

namespace ps {

class UnixSocketDir {
 public:
  UnixSocketDir() {
    const char* tmp = getenv("TEST_TMPDIR");
    std::string pattern = absl::StrCat(tmp != nullptr ? tmp : "/tmp", "/sockets-XXXXXX");
    if (mkdtemp(pattern.data()) == nullptr) {
      ADD_FAILURE() << "mkdtemp " << pattern << ": " << std::strerror(errno);
      return;
    }
    folder_ = pattern;
    chmod(folder_.c_str(), 0700);
    via_ = folder_;
    if (folder_.size() > 64) {  // leave room for file names under 107 bytes
      std::string link = "/tmp/ps-sock-XXXXXX";
      // mkdtemp picks a free name; the link replaces the empty folder.
      if (mkdtemp(link.data()) == nullptr || rmdir(link.c_str()) != 0 ||
          symlink(folder_.c_str(), link.c_str()) != 0) {
        ADD_FAILURE() << "cannot link " << link << " to " << folder_ << ": "
                      << std::strerror(errno);
        return;
      }
      link_ = via_ = link;
    }
  }

  ~UnixSocketDir() {
    std::error_code ignored;
    if (!link_.empty()) unlink(link_.c_str());
    if (!folder_.empty()) {
      chmod(folder_.c_str(), 0700);
      std::filesystem::remove_all(folder_, ignored);
    }
  }

  UnixSocketDir(const UnixSocketDir&) = delete;
  UnixSocketDir& operator=(const UnixSocketDir&) = delete;

  // The real folder (under TEST_TMPDIR).
  const std::string& folder() const { return folder_; }
  // The folder as socket paths name it (maybe the short link).
  const std::string& via() const { return via_; }
  // A socket file's path in the folder, and its unix: address.
  std::string Path(absl::string_view name) const { return absl::StrCat(via_, "/", name); }
  std::string Address(absl::string_view name) const { return absl::StrCat("unix:", Path(name)); }

 private:
  std::string folder_;
  std::string via_;
  std::string link_;
};

}  // namespace ps

#endif  // PS_TESTS_UNIX_SOCKET_DIR_H_
