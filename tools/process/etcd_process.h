// EtcdProcess: a real etcd (Debian's etcd-server, /usr/bin/etcd), one
// member on 127.0.0.1 ports picked free, its data in a folder the caller
// names: for the tests of the coordinator (coord/) and ps_bench elastic.
// Start waits (bounded) until it answers; the destructor stops it
// (SIGTERM, then SIGKILL). One thread owns it. EtcdTestPath and
// ConnectPlain are what its tests share.
#ifndef PS_TOOLS_PROCESS_ETCD_PROCESS_H_
#define PS_TOOLS_PROCESS_ETCD_PROCESS_H_

#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdlib>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"
#include "absl/time/clock.h"
#include "coord/etcd_client.h"
#include "tools/process/child_process.h"

namespace ps {

// A TCP port on 127.0.0.1 that nothing listens on now.
inline int FreeLocalPort() {
  const int fd = socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof(a);
  int port = 0;
  if (bind(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) == 0 &&
      getsockname(fd, reinterpret_cast<sockaddr*>(&a), &len) == 0) {
    port = ntohs(a.sin_port);
  }
  close(fd);
  return port;
}

class EtcdProcess {
 public:
  // Starts etcd with its data in `dir` (made by etcd if missing), on
  // `client_port` (0: a free one). With `certs` (a deploy/make_certs.sh
  // folder), clients need mutual TLS: etcd.pem serves, ca.pem verifies;
  // Start's own probe presents admin.pem.
  static absl::StatusOr<std::unique_ptr<EtcdProcess>> Start(const std::string& dir,
                                                            int client_port = 0,
                                                            const std::string& certs = "") {
    const int port = client_port != 0 ? client_port : FreeLocalPort();
    const int peer = FreeLocalPort();
    const std::string client_url =
        absl::StrCat(certs.empty() ? "http" : "https", "://127.0.0.1:", port);
    const std::string peer_url = absl::StrCat("http://127.0.0.1:", peer);
    std::vector<std::string> argv = {"/usr/bin/etcd",
                                     "--name=test",
                                     absl::StrCat("--data-dir=", dir),
                                     absl::StrCat("--listen-client-urls=", client_url),
                                     absl::StrCat("--advertise-client-urls=", client_url),
                                     absl::StrCat("--listen-peer-urls=", peer_url),
                                     absl::StrCat("--initial-advertise-peer-urls=", peer_url),
                                     absl::StrCat("--initial-cluster=test=", peer_url)};
    SecurityOptions security;
    if (!certs.empty()) {
      argv.push_back(absl::StrCat("--cert-file=", certs, "/etcd.pem"));
      argv.push_back(absl::StrCat("--key-file=", certs, "/etcd.key"));
      argv.push_back(absl::StrCat("--trusted-ca-file=", certs, "/ca.pem"));
      argv.push_back("--client-cert-auth");
      security.tls_ca = certs + "/ca.pem";
      security.tls_cert = certs + "/admin.pem";
      security.tls_key = certs + "/admin.key";
    }
    absl::StatusOr<std::unique_ptr<ChildProcess>> child =
        ChildProcess::Spawn(argv, dir + ".log", /*pipe_stdout=*/false);
    if (!child.ok()) return child.status();
    std::unique_ptr<EtcdProcess> e(new EtcdProcess(*std::move(child), port));
    absl::StatusOr<CoordinatorAddress> a =
        ParseCoordinatorAddress(absl::StrCat("etcd://", e->endpoint()));
    if (!a.ok()) return a.status();
    const absl::Time deadline = absl::Now() + absl::Seconds(30);
    absl::Status s;
    while (absl::Now() < deadline) {
      // A new channel each try: a refused one would back off for seconds.
      absl::StatusOr<std::unique_ptr<EtcdClient>> c =
          EtcdClient::Connect(*a, security, absl::Seconds(1));
      if (!c.ok()) return c.status();
      s = (*c)->List("/").status();
      if (s.ok()) return e;
      if (e->child_->Poll().has_value()) break;
      absl::SleepFor(absl::Milliseconds(100));
    }
    return absl::UnavailableError(absl::StrCat("etcd did not answer on ", e->endpoint(), ": ",
                                               s.message(), "\n", e->child_->LogTail(20)));
  }

  ~EtcdProcess() { child_->Stop(absl::Seconds(5)); }

  std::string endpoint() const { return absl::StrCat("127.0.0.1:", port_); }
  std::string url() const { return absl::StrCat("etcd://", endpoint()); }
  int port() const { return port_; }
  void Kill() { child_->Stop(absl::ZeroDuration()); }

 private:
  EtcdProcess(std::unique_ptr<ChildProcess> child, int port)
      : child_(std::move(child)), port_(port) {}

  std::unique_ptr<ChildProcess> child_;
  const int port_;
};

// `name` under the test's TEST_TMPDIR (/tmp outside Bazel).
inline std::string EtcdTestPath(const std::string& name) {
  const char* base = std::getenv("TEST_TMPDIR");
  return absl::StrCat(base != nullptr ? base : "/tmp", "/", name);
}

// A plaintext client of `etcd` (null, with the error, on failure).
inline absl::StatusOr<std::unique_ptr<EtcdClient>> ConnectPlain(const EtcdProcess& etcd) {
  absl::StatusOr<CoordinatorAddress> a = ParseCoordinatorAddress(etcd.url());
  if (!a.ok()) return a.status();
  return EtcdClient::Connect(*a);
}

}  // namespace ps

#endif  // PS_TOOLS_PROCESS_ETCD_PROCESS_H_
