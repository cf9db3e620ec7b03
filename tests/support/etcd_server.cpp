#include "tests/support/etcd_server.hpp"

#include <thread>

#include <caf/sec.hpp>
#include <unistd.h>

#include "cluster/etcd_client.hpp"
#include "common/error.hpp"
#include "tests/support/sockets.hpp"

namespace tessera::test {

bool have_etcd() {
  return ::access(etcd_binary, X_OK) == 0;
}

caf::expected<std::unique_ptr<etcd_server>> etcd_server::start(const std::filesystem::path& data_dir,
                                                                uint16_t client_port) {
  std::filesystem::create_directories(data_dir);
  const uint16_t port = client_port != 0 ? client_port : free_port();
  const uint16_t peer = free_port();
  const std::string client_url = "http://127.0.0.1:" + std::to_string(port);
  const std::string peer_url = "http://127.0.0.1:" + std::to_string(peer);
  child_options o;
  o.capture_stdout = false;
  auto p = child_process::spawn(etcd_binary,
                                {"--name", "test", "--data-dir", data_dir.string(), "--listen-client-urls",
                                 client_url, "--advertise-client-urls", client_url, "--listen-peer-urls", peer_url,
                                 "--initial-advertise-peer-urls", peer_url, "--initial-cluster",
                                 "test=" + peer_url, "--logger", "zap", "--log-level", "error"},
                                o);
  if (!p)
    return p.error();
  std::unique_ptr<etcd_server> s{new etcd_server};
  s->proc_.emplace(std::move(*p));
  s->port_ = port;
  auto ep = cluster::parse_etcd_url(client_url);
  cluster::etcd_client c{{{*ep}, std::chrono::milliseconds{500}}};
  caf::error last;
  for (int i = 0; i < 150; ++i) {
    auto r = c.range_prefix("/ready-probe/");
    if (r)
      return s;
    last = r.error();
    if (!s->proc_->running())
      break;
    std::this_thread::sleep_for(std::chrono::milliseconds{100});
  }
  return caf::make_error(caf::sec::runtime_error, "etcd did not come up on " + client_url + ": " + error_text(last));
}

etcd_server::~etcd_server() {
  kill();
}

std::string etcd_server::url() const {
  return "http://127.0.0.1:" + std::to_string(port_);
}

void etcd_server::kill() {
  if (proc_ && proc_->running()) {
    proc_->kill(SIGKILL);
    (void)proc_->wait(std::chrono::seconds{10});
  }
}

} // namespace tessera::test
