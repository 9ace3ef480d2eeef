#include "common/npy.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace ps {

absl::Status WriteNpy(const std::string& path, const std::vector<int64_t>& shape,
                      absl::Span<const float> data) {
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  if (n != static_cast<int64_t>(data.size())) {
    return absl::InvalidArgumentError(
        absl::StrCat("WriteNpy ", path, ": shape holds ", n, " elements, data ", data.size()));
  }
  std::string dims;
  for (int64_t d : shape) absl::StrAppend(&dims, d, ",");
  if (shape.size() > 1) dims.pop_back();  // "(3,)" for 1-D, "(3,4)" otherwise
  std::string header = absl::StrCat("{'descr': '<f4', 'fortran_order': False, 'shape': (",
                                    dims, "), }");
  // Magic(6) + version(2) + header length(2) + header, padded with spaces to a
  // multiple of 64 bytes and ended by '\n'.
  const size_t unpadded = 10 + header.size() + 1;
  header.append((64 - unpadded % 64) % 64, ' ');
  header.push_back('\n');
  std::string out("\x93NUMPY\x01\x00", 8);
  out.push_back(static_cast<char>(header.size() & 0xff));
  out.push_back(static_cast<char>(header.size() >> 8));
  out += header;
  out.append(reinterpret_cast<const char*>(data.data()), data.size() * sizeof(float));
  const std::string tmp = path + ".tmp";
  std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
  f.write(out.data(), out.size());
  f.close();
  if (!f) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  if (std::rename(tmp.c_str(), path.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp, " to ", path));
  }
  return absl::OkStatus();
}

absl::StatusOr<NpyArray> ReadNpy(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  if (!f) return absl::NotFoundError(absl::StrCat("cannot open ", path));
  std::stringstream ss;
  ss << f.rdbuf();
  const std::string s = ss.str();
  if (s.size() < 10 || s.compare(0, 6, "\x93NUMPY") != 0 || s[6] != 1) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": not a version 1 .npy file"));
  }
  const size_t hlen = static_cast<unsigned char>(s[8]) | (static_cast<unsigned char>(s[9]) << 8);
  if (s.size() < 10 + hlen) return absl::InvalidArgumentError(absl::StrCat(path, ": truncated"));
  const std::string header = s.substr(10, hlen);
  if (header.find("'<f4'") == std::string::npos ||
      header.find("'fortran_order': False") == std::string::npos) {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": only C-order little-endian float32 is supported"));
  }
  const size_t open = header.find("'shape': (");
  const size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": header has no shape"));
  }
  NpyArray a;
  int64_t n = 1;
  for (absl::string_view d : absl::StrSplit(
           absl::string_view(header).substr(open + 10, close - open - 10), ',',
           absl::SkipWhitespace())) {
    int64_t v;
    if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(d), &v)) {
      return absl::InvalidArgumentError(absl::StrCat(path, ": bad shape"));
    }
    a.shape.push_back(v);
    n *= v;
  }
  if (s.size() - 10 - hlen != static_cast<size_t>(n) * sizeof(float)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": data size does not match shape"));
  }
  a.data.resize(n);
  std::memcpy(a.data.data(), s.data() + 10 + hlen, n * sizeof(float));
  return a;
}

}  // namespace ps
