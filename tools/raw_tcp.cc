#include "tools/raw_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <thread>

#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"

namespace ps {
namespace {

bool WriteFull(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return false;
    p += w;
    n -= w;
  }
  return true;
}

bool ReadFull(int fd, char* p, size_t n) {
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, 0);
    if (r < 0 && errno == EINTR) continue;
    if (r <= 0) return false;
    p += r;
    n -= r;
  }
  return true;
}

void NoDelay(int fd) {
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one));
}

size_t RequestBytes(RawPattern p, int64_t payload) { return p == RawPattern::kFetch ? 1 : payload; }
size_t ReplyBytes(RawPattern p, int64_t payload) { return p == RawPattern::kSend ? 1 : payload; }

}  // namespace

absl::StatusOr<OpTimings> RunRawTcp(RawPattern pattern, int64_t payload_bytes, int clients,
                                    int warmup, absl::Duration duration) {
  const int listener = socket(AF_INET, SOCK_STREAM, 0);
  if (listener < 0) return absl::InternalError(absl::StrCat("socket: ", strerror(errno)));
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(listener, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener, clients) != 0 ||
      getsockname(listener, reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    close(listener);
    return absl::InternalError(absl::StrCat("bind/listen on loopback: ", strerror(errno)));
  }
  const size_t req = RequestBytes(pattern, payload_bytes);
  const size_t rep = ReplyBytes(pattern, payload_bytes);

  // Server side: one thread per connection, answering until the client closes.
  std::vector<std::thread> servers;
  for (int c = 0; c < clients; ++c) {
    servers.emplace_back([listener, req, rep] {
      const int fd = accept(listener, nullptr, nullptr);
      if (fd < 0) return;
      NoDelay(fd);
      std::vector<char> in(req), out(rep, 'r');
      while (ReadFull(fd, in.data(), req) && WriteFull(fd, out.data(), rep)) {
      }
      close(fd);
    });
  }

  absl::Mutex mu;
  OpTimings result;
  absl::Status error;
  absl::Time start, end = absl::InfinitePast();
  absl::Barrier* ready = new absl::Barrier(clients + 1);  // deleted by the last waiter
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back([&] {
      const int fd = socket(AF_INET, SOCK_STREAM, 0);
      bool ok = fd >= 0 && connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) == 0;
      if (ok) NoDelay(fd);
      std::vector<char> out(req, 'q'), in(rep);
      auto op = [&] { return WriteFull(fd, out.data(), req) && ReadFull(fd, in.data(), rep); };
      for (int i = 0; ok && i < warmup; ++i) ok = op();
      if (ready->Block()) delete ready;
      std::vector<absl::Duration> lat;
      absl::Time t = absl::Now();
      const absl::Time stop = t + duration;
      while (ok && (t < stop || lat.empty())) {
        ok = op();
        const absl::Time now = absl::Now();
        lat.push_back(now - t);
        t = now;
      }
      if (fd >= 0) close(fd);
      absl::MutexLock l(&mu);
      if (!ok && error.ok()) error = absl::InternalError("raw TCP transfer failed");
      result.ops += static_cast<int64_t>(lat.size());
      result.latencies.insert(result.latencies.end(), lat.begin(), lat.end());
      end = std::max(end, t);
    });
  }
  if (ready->Block()) delete ready;
  start = absl::Now();
  for (auto& t : threads) t.join();
  for (auto& t : servers) t.join();
  close(listener);
  if (!error.ok()) return error;
  result.wall = end - start;
  return result;
}

}  // namespace ps
