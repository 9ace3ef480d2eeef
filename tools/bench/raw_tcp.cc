#include "tools/bench/raw_tcp.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/time.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <fstream>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/strings/str_cat.h"
#include "absl/synchronization/barrier.h"
#include "absl/synchronization/mutex.h"
#include "common/status_macros.h"

namespace ps {
namespace {

constexpr int kSocketBuffer = 4 << 20;  // bytes, SO_SNDBUF and SO_RCVBUF
constexpr size_t kFirstChunk = 1 << 20;  // a duplex reply starts after this much request

absl::Status Errno(absl::string_view what) {
  const int e = errno;
  if (e == EAGAIN || e == EWOULDBLOCK) {
    return absl::DeadlineExceededError(
        absl::StrCat("raw TCP: ", what, ": no progress for ", absl::FormatDuration(kIoTimeout)));
  }
  return absl::UnavailableError(absl::StrCat("raw TCP: ", what, ": ", std::strerror(e)));
}

// Owns a socket descriptor.
class Socket {
 public:
  explicit Socket(int fd) : fd_(fd) {}
  ~Socket() {
    if (fd_ >= 0) close(fd_);
  }
  Socket(const Socket&) = delete;
  Socket& operator=(const Socket&) = delete;
  int fd() const { return fd_; }

 private:
  const int fd_;
};

// The kernel's cap on socket buffers (/proc/sys/net/core/NAME), or 0.
int64_t BufferCap(const char* name) {
  std::ifstream in(absl::StrCat("/proc/sys/net/core/", name));
  int64_t v = 0;
  return (in >> v) ? v : 0;
}

absl::Status SetOption(int fd, int level, int name, const void* value, socklen_t len,
                       const char* what) {
  if (setsockopt(fd, level, name, value, len) != 0) return Errno(absl::StrCat("setsockopt ", what));
  return absl::OkStatus();
}

// TCP_NODELAY, kIoTimeout on every blocking call, and 4 MB buffers where
// the kernel allows that much (a smaller fixed buffer would switch off
// autotuning and slow the baseline down, so then the kernel's are kept).
absl::Status Tune(int fd) {
  const int one = 1, buffer = kSocketBuffer;
  timeval tv{};
  tv.tv_sec = absl::ToInt64Seconds(kIoTimeout);
  RETURN_IF_ERROR(SetOption(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof(one), "TCP_NODELAY"));
  RETURN_IF_ERROR(SetOption(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv), "SO_RCVTIMEO"));
  RETURN_IF_ERROR(SetOption(fd, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv), "SO_SNDTIMEO"));
  static const bool big_send = BufferCap("wmem_max") >= kSocketBuffer;
  static const bool big_receive = BufferCap("rmem_max") >= kSocketBuffer;
  if (big_send) {
    RETURN_IF_ERROR(SetOption(fd, SOL_SOCKET, SO_SNDBUF, &buffer, sizeof(buffer), "SO_SNDBUF"));
  }
  if (big_receive) {
    RETURN_IF_ERROR(SetOption(fd, SOL_SOCKET, SO_RCVBUF, &buffer, sizeof(buffer), "SO_RCVBUF"));
  }
  return absl::OkStatus();
}

// Sends all n bytes: one send() for the whole message, more only for what
// the kernel left over.
absl::Status WriteFull(int fd, const char* p, size_t n) {
  while (n > 0) {
    const ssize_t w = send(fd, p, n, MSG_NOSIGNAL);
    if (w < 0 && errno == EINTR) continue;
    if (w <= 0) return Errno("send");
    p += w;
    n -= static_cast<size_t>(w);
  }
  return absl::OkStatus();
}

// Receives all n bytes (recv with MSG_WAITALL, repeated after a signal or
// a timeout with progress). `*closed` (if given) is set, with OK, when the
// peer closed the connection before the first byte: the end of the stream;
// a close after it is an error.
absl::Status ReadFull(int fd, char* p, size_t n, bool* closed = nullptr) {
  const size_t want = n;
  if (closed != nullptr) *closed = false;
  while (n > 0) {
    const ssize_t r = recv(fd, p, n, MSG_WAITALL);
    if (r < 0 && errno == EINTR) continue;
    if (r < 0) return Errno("recv");
    if (r == 0) {
      if (closed != nullptr && n == want) {
        *closed = true;
        return absl::OkStatus();
      }
      return absl::UnavailableError(absl::StrCat("raw TCP: the peer closed the connection after ",
                                                 want - n, " of ", want, " bytes"));
    }
    p += r;
    n -= static_cast<size_t>(r);
  }
  return absl::OkStatus();
}

// A message buffer of its own pages, on transparent huge pages where the
// kernel gives them (fewer TLB misses while the kernel copies to and from
// it), filled with `fill` so that no page faults during the timed ops.
// Falls back to the heap where mmap fails.
class Buffer {
 public:
  Buffer(size_t n, char fill) {
    constexpr size_t kHuge = 2 << 20;
    mapped_ = (n + kHuge - 1) / kHuge * kHuge;
    void* p = mmap(nullptr, mapped_, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS, -1, 0);
    if (p == MAP_FAILED) {
      mapped_ = 0;
      heap_.resize(n);
      data_ = heap_.data();
    } else {
      madvise(p, mapped_, MADV_HUGEPAGE);  // a hint: EINVAL without THP is fine
      data_ = static_cast<char*>(p);
    }
    std::memset(data_, fill, n);
  }
  ~Buffer() {
    if (mapped_ > 0) munmap(data_, mapped_);
  }
  Buffer(const Buffer&) = delete;
  Buffer& operator=(const Buffer&) = delete;
  char* data() { return data_; }

 private:
  size_t mapped_ = 0;  // bytes mapped; 0 on the heap
  std::vector<char> heap_;
  char* data_ = nullptr;
};

// A count that one thread raises and another waits for, until the raising
// side ends (cleanly, or with an error). Thread-safe.
class Progress {
 public:
  void Advance() {
    absl::MutexLock l(&mu_);
    ++count_;
  }
  void End(absl::Status status) {
    absl::MutexLock l(&mu_);
    ended_ = true;
    if (end_.ok()) end_ = std::move(status);
  }
  // True once the count reaches n; false if the other side ended cleanly
  // before; its error if it failed; DEADLINE_EXCEEDED after kIoTimeout.
  absl::StatusOr<bool> WaitFor(int64_t n) {
    absl::MutexLock l(&mu_);
    auto done = [this, n]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return count_ >= n || ended_; };
    if (!mu_.AwaitWithTimeout(absl::Condition(&done), kIoTimeout)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "raw TCP: waited ", absl::FormatDuration(kIoTimeout), " for message ", n));
    }
    if (count_ >= n) return true;
    if (!end_.ok()) return end_;
    return false;
  }

 private:
  absl::Mutex mu_;
  int64_t count_ ABSL_GUARDED_BY(mu_) = 0;
  bool ended_ ABSL_GUARDED_BY(mu_) = false;
  absl::Status end_ ABSL_GUARDED_BY(mu_);
};

// Serves one connection: a reply of `rep` bytes to each request of `req`
// bytes, until the client closes.
absl::Status Serve(int fd, size_t req, size_t rep, bool duplex) {
  Buffer in(req, 0), out(rep, 'r');
  if (!duplex) {
    for (;;) {
      bool closed = false;
      RETURN_IF_ERROR(ReadFull(fd, in.data(), req, &closed));
      if (closed) return absl::OkStatus();
      RETURN_IF_ERROR(WriteFull(fd, out.data(), rep));
    }
  }
  // Duplex: this thread reads; `writer` answers request k once its first
  // chunk is in.
  Progress started;
  absl::Status written;
  std::thread writer([&] {
    for (int64_t k = 1;; ++k) {
      absl::StatusOr<bool> go = started.WaitFor(k);
      if (go.ok() && !*go) return;  // the client closed
      written = go.ok() ? WriteFull(fd, out.data(), rep) : go.status();
      if (!written.ok()) {
        shutdown(fd, SHUT_RDWR);  // wakes the reader
        return;
      }
    }
  });
  const size_t first = std::min(req, kFirstChunk);
  absl::Status read;
  for (;;) {
    bool closed = false;
    read = ReadFull(fd, in.data(), first, &closed);
    if (!read.ok() || closed) break;
    started.Advance();
    read = ReadFull(fd, in.data() + first, req - first);
    if (!read.ok()) break;
  }
  started.End(read);
  writer.join();
  return written.ok() ? read : written;
}

// One client connection's timed ops.
struct ClientRun {
  absl::Status status;
  std::vector<absl::Duration> latencies;
  absl::Time start, end;  // of the timed ops
};

// Runs `warmup` ops, waits at `ready`, then ops until `duration` has passed
// (at least one).
void RunClient(const sockaddr_in& addr, size_t req, size_t rep, bool duplex, int warmup,
               absl::Duration duration, absl::Barrier* ready, ClientRun* run) {
  auto arrive = [ready] {
    if (ready->Block()) delete ready;
  };
  Socket s(socket(AF_INET, SOCK_STREAM, 0));
  const int fd = s.fd();
  absl::Status st = fd < 0 ? Errno("socket") : Tune(fd);
  if (st.ok() && connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) != 0) {
    st = Errno("connect");
  }
  if (!st.ok()) {
    arrive();
    run->status = st;
    return;
  }
  Buffer out(req, 'q'), in(rep, 0);
  Progress replies;  // duplex: counted by `reader`
  std::thread reader;
  if (duplex) {
    reader = std::thread([&] {
      absl::Status r;
      for (;;) {
        bool closed = false;
        r = ReadFull(fd, in.data(), rep, &closed);
        if (!r.ok() || closed) break;
        replies.Advance();
      }
      replies.End(r);
    });
  }
  int64_t sent = 0;
  auto op = [&]() -> absl::Status {
    RETURN_IF_ERROR(WriteFull(fd, out.data(), req));
    ++sent;
    if (!duplex) return ReadFull(fd, in.data(), rep);
    ASSIGN_OR_RETURN(const bool got, replies.WaitFor(sent));
    if (!got) return absl::UnavailableError("raw TCP: the server closed the connection");
    return absl::OkStatus();
  };
  for (int i = 0; st.ok() && i < warmup; ++i) st = op();
  arrive();
  absl::Time t = run->start = absl::Now();
  const absl::Time stop = t + duration;
  while (st.ok() && (t < stop || run->latencies.empty())) {
    st = op();
    if (!st.ok()) break;
    const absl::Time now = absl::Now();
    run->latencies.push_back(now - t);
    t = now;
  }
  run->end = t;
  // The server sees the end of the stream, finishes and closes; the
  // reader then sees the close.
  shutdown(fd, st.ok() ? SHUT_WR : SHUT_RDWR);
  if (reader.joinable()) reader.join();
  run->status = st;
}

}  // namespace

absl::StatusOr<OpTimings> RunRawTcp(RawPattern pattern, int64_t payload_bytes, int clients,
                                    int warmup, absl::Duration duration) {
  if (payload_bytes < 1 || clients < 1 || warmup < 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "raw TCP: need payload_bytes >= 1, clients >= 1, warmup >= 0; got ", payload_bytes, ", ",
        clients, ", ", warmup));
  }
  Socket listener(socket(AF_INET, SOCK_STREAM, 0));
  if (listener.fd() < 0) return Errno("socket");
  RETURN_IF_ERROR(Tune(listener.fd()));  // accepted sockets inherit it (accept times out too)
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  addr.sin_port = 0;
  socklen_t len = sizeof(addr);
  if (bind(listener.fd(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0 ||
      listen(listener.fd(), clients) != 0 ||
      getsockname(listener.fd(), reinterpret_cast<sockaddr*>(&addr), &len) != 0) {
    return Errno("bind/listen on 127.0.0.1");
  }
  const size_t req = pattern == RawPattern::kFetch ? 1 : static_cast<size_t>(payload_bytes);
  const size_t rep = pattern == RawPattern::kSend ? 1 : static_cast<size_t>(payload_bytes);
  const bool duplex = pattern == RawPattern::kExchange && payload_bytes >= kDuplexFrom;

  std::vector<absl::Status> served(clients);
  std::vector<std::thread> servers;
  for (int c = 0; c < clients; ++c) {
    servers.emplace_back([&, c] {
      Socket conn(accept(listener.fd(), nullptr, nullptr));
      served[c] = conn.fd() < 0 ? Errno("accept") : Serve(conn.fd(), req, rep, duplex);
    });
  }
  std::vector<ClientRun> runs(clients);
  auto* ready = new absl::Barrier(clients);  // deleted by the last to arrive
  std::vector<std::thread> threads;
  for (int c = 0; c < clients; ++c) {
    threads.emplace_back(RunClient, std::cref(addr), req, rep, duplex, warmup, duration, ready,
                         &runs[c]);
  }
  for (auto& t : threads) t.join();
  shutdown(listener.fd(), SHUT_RDWR);  // wakes an accept whose client never came
  for (auto& t : servers) t.join();

  OpTimings result;
  for (const ClientRun& r : runs) RETURN_IF_ERROR(r.status);
  for (const absl::Status& s : served) RETURN_IF_ERROR(s);
  // From the first client's first timed op to the last one's last.
  absl::Time start = absl::InfiniteFuture(), end = absl::InfinitePast();
  for (ClientRun& r : runs) {
    result.ops += static_cast<int64_t>(r.latencies.size());
    result.latencies.insert(result.latencies.end(), r.latencies.begin(), r.latencies.end());
    start = std::min(start, r.start);
    end = std::max(end, r.end);
  }
  result.wall = end - start;
  return result;
}

}  // namespace ps
