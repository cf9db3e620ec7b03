// The public ucx_transport: a facade over detail::ucx_core (ucx_core.hpp),
// which holds the state and does the work on its progress thread.

#include "transport/ucx/ucx_transport.hpp"

#include "transport/ucx/ucx_core.hpp"
#include "transport/ucx/ucx_test_access.hpp"

namespace tessera::transport {

ucx_transport::ucx_transport(std::unique_ptr<detail::ucx_core> core) : core_(std::move(core)) {}

caf::expected<std::unique_ptr<ucx_transport>> ucx_transport::make(transport_options options,
                                                                 ucx_options ucx) {
  auto core = std::make_unique<detail::ucx_core>(options, ucx);
  if (auto err = core->start())
    return err;
  return std::unique_ptr<ucx_transport>{new ucx_transport{std::move(core)}};
}

ucx_transport::~ucx_transport() = default;

const capabilities& ucx_transport::caps() const {
  return core_->caps();
}

void ucx_transport::set_handler(transport_handler* handler) {
  core_->set_handler(handler);
}

caf::expected<std::string> ucx_transport::listen(const std::string& address) {
  return core_->listen(address);
}

caf::expected<peer_id> ucx_transport::connect(const std::string& address) {
  return core_->connect(address);
}

caf::expected<region_id> ucx_transport::register_region(std::span<std::byte> memory) {
  return core_->register_region(memory);
}

caf::expected<allocated_region> ucx_transport::allocate_region(uint64_t bytes) {
  return core_->allocate_region(bytes);
}

void ucx_transport::send(peer_id to, message msg, completion done) {
  core_->send(to, std::move(msg), std::move(done));
}

void ucx_transport::transfer(peer_id to, transfer_batch batch, completion done) {
  core_->transfer(to, std::move(batch), std::move(done));
}

void ucx_transport::disconnect(peer_id peer) {
  core_->disconnect(peer);
}

caf::expected<grant_id> ucx_transport::grant(peer_id peer, std::vector<memory_range> ranges) {
  return core_->grant(peer, std::move(ranges));
}

void ucx_transport::revoke(grant_id id) {
  core_->revoke(id);
}

std::string ucx_transport::peer_identity(peer_id peer) const {
  return core_->peer_identity(peer);
}

std::vector<std::pair<std::string, uint64_t>> ucx_transport::rejections() const {
  return core_->rejections();
}

ucx_kv_path ucx_transport::kv_path() const {
  return core_->kv_path();
}

ucx_kv_path ucx_transport::kv_path_to(peer_id peer) const {
  return core_->same_host(peer) ? ucx_kv_path::put : core_->kv_path();
}

uint64_t ucx_transport::rejected_block_messages() const {
  return core_->rejected_block_messages();
}

} // namespace tessera::transport

namespace tessera::transport::detail {

void ucx_test_access::transfer_unchecked(ucx_transport& t, peer_id to, transfer_batch batch,
                                         completion done) {
  t.core_->transfer_unchecked(to, std::move(batch), std::move(done));
}

std::vector<std::byte> ucx_test_access::worker_address(ucx_transport& t) {
  return t.core_->worker_address();
}

void ucx_test_access::send_unchecked(ucx_transport& t, peer_id to, const std::string& actor,
                                     std::span<const std::byte> data, bool rndv, completion done) {
  t.core_->send_unchecked(to, actor, data, rndv, std::move(done));
}

bool ucx_test_access::same_host(ucx_transport& t, peer_id p) {
  return t.core_->same_host(p);
}

std::vector<std::byte> ucx_test_access::same_host_worker_address(ucx_transport& t) {
  return t.core_->same_host_worker_address();
}

uint64_t ucx_test_access::same_host_put_batches(ucx_transport& t) {
  return t.core_->same_host_put_batches();
}

uint64_t ucx_test_access::mapped_put_batches(ucx_transport& t) {
  return t.core_->mapped_put_batches();
}

uint64_t ucx_test_access::eager_runs_received(ucx_transport& t) {
  return t.core_->eager_runs_received();
}

uint64_t ucx_test_access::folded_batches_sent(ucx_transport& t) {
  return t.core_->folded_batches_sent();
}

uint64_t ucx_test_access::folded_batches_received(ucx_transport& t) {
  return t.core_->folded_batches_received();
}

} // namespace tessera::transport::detail
