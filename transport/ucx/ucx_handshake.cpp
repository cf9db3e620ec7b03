#include "transport/ucx/ucx_handshake.hpp"

#include <cstring>

#include <openssl/crypto.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "common/assert.hpp"
#include "transport/transport_errc.hpp"
#include "transport/ucx/ucx_support.hpp"

namespace tessera::transport::detail {

namespace {

constexpr char magic[8] = {'T', 'E', 'S', 'S', 'E', 'R', 'A', '!'};
constexpr uint8_t version = 1;
constexpr size_t mac_bytes = 32;

void append(std::vector<std::byte>& out, std::span<const std::byte> b) {
  out.insert(out.end(), b.begin(), b.end());
}

std::span<const std::byte> as_bytes(std::string_view s) {
  return {reinterpret_cast<const std::byte*>(s.data()), s.size()};
}

/// HMAC(K, label | transcript | body).
std::array<std::byte, 32> proof(std::string_view key, std::string_view label,
                                std::span<const std::byte> transcript,
                                std::span<const std::byte> body) {
  std::vector<std::byte> data;
  data.reserve(label.size() + 1 + transcript.size() + body.size());
  append(data, as_bytes(label));
  data.push_back(std::byte{0});
  append(data, transcript);
  append(data, body);
  return hmac_sha256(key, data);
}

bool same_mac(const std::byte* got, const std::array<std::byte, 32>& want) {
  return CRYPTO_memcmp(got, want.data(), mac_bytes) == 0;
}

void put_string(writer& w, const std::string& s) {
  w.put<uint16_t>(static_cast<uint16_t>(s.size()));
  w.bytes(s.data(), s.size());
}

void put_blob(writer& w, const std::vector<std::byte>& b) {
  w.put<uint32_t>(static_cast<uint32_t>(b.size()));
  w.bytes(b.data(), b.size());
}

} // namespace

const char* to_string(handshake_failure f) {
  switch (f) {
    case handshake_failure::malformed: return "malformed";
    case handshake_failure::bad_proof: return "bad_proof";
    case handshake_failure::oversize: return "oversize";
    case handshake_failure::timeout: return "timeout";
    case handshake_failure::closed: return "closed";
    case handshake_failure::refused: return "refused";
  }
  return "malformed";
}

std::array<std::byte, 32> hmac_sha256(std::string_view key, std::span<const std::byte> data) {
  std::array<std::byte, 32> out{};
  unsigned len = 0;
  // A zero-length key is valid HMAC; OpenSSL wants a non-null pointer.
  static const unsigned char empty = 0;
  const void* k = key.empty() ? static_cast<const void*>(&empty) : key.data();
  auto* r = HMAC(EVP_sha256(), k, static_cast<int>(key.size()),
                 reinterpret_cast<const unsigned char*>(data.data()), data.size(),
                 reinterpret_cast<unsigned char*>(out.data()), &len);
  TESSERA_ASSERT(r != nullptr && len == out.size(), "HMAC-SHA256 failed");
  return out;
}

void random_bytes(std::span<std::byte> out) {
  TESSERA_ASSERT(RAND_bytes(reinterpret_cast<unsigned char*>(out.data()),
                            static_cast<int>(out.size())) == 1,
                 "the system's random number generator failed");
}

uint64_t random_session() {
  uint64_t v = 0;
  while (v == 0)
    random_bytes({reinterpret_cast<std::byte*>(&v), sizeof(v)});
  return v;
}

handshake::handshake(role r, std::string secret, handshake_offer me)
    : role_(r), secret_(std::move(secret)), me_(std::move(me)),
      step_(r == role::client ? step::start : step::wait_m1) {
  random_bytes(nonce_);
}

caf::error handshake::fail(handshake_failure f, const std::string& why) {
  step_ = step::failed;
  failure_ = f;
  return make_transport_error(transport_errc::unauthenticated,
                              std::string{"handshake "} + to_string(f) + ": " + why);
}

std::vector<std::byte> handshake::start() {
  if (role_ != role::client || step_ != step::start)
    return {};
  writer w;
  w.bytes(magic, sizeof(magic));
  w.put<uint8_t>(version);
  w.bytes(nonce_.data(), nonce_.size());
  put_string(w, me_.id);
  transcript_ = w.out;
  step_ = step::wait_m2;
  return std::move(w.out);
}

caf::expected<std::vector<std::byte>> handshake::on_message(std::span<const std::byte> body) {
  if (body.size() > max_handshake_message_bytes)
    return fail(handshake_failure::oversize,
                "a message of " + std::to_string(body.size()) + " bytes (at most "
                  + std::to_string(max_handshake_message_bytes) + ")");
  reader rd{body.data(), body.size()};
  switch (step_) {
    case step::wait_m1: { // server
      auto* m = rd.take(sizeof(magic));
      auto v = rd.get<uint8_t>();
      rd.take(32);
      auto id_len = rd.get<uint16_t>();
      if (!rd.ok || std::memcmp(m, magic, sizeof(magic)) != 0)
        return fail(handshake_failure::malformed, "not a Tessera handshake");
      if (v != version)
        return fail(handshake_failure::malformed,
                    "handshake version " + std::to_string(v) + " (this build speaks "
                      + std::to_string(version) + ")");
      if (id_len > max_handshake_id_bytes)
        return fail(handshake_failure::oversize,
                    "a node id of " + std::to_string(id_len) + " bytes");
      auto* id = rd.take(id_len);
      if (!rd.ok || rd.n != 0)
        return fail(handshake_failure::malformed, "a first message of the wrong length");
      peer_.id.assign(reinterpret_cast<const char*>(id), id_len);
      transcript_.assign(body.begin(), body.end());
      writer w;
      w.bytes(nonce_.data(), nonce_.size());
      auto mac = proof(secret_, "tessera server-proof v1", transcript_, w.out);
      w.bytes(mac.data(), mac.size());
      append(transcript_, w.out);
      step_ = step::wait_m3;
      return std::move(w.out);
    }
    case step::wait_m2: { // client
      if (body.size() != 32 + mac_bytes)
        return fail(handshake_failure::malformed, "a challenge of the wrong length");
      auto want = proof(secret_, "tessera server-proof v1", transcript_, body.first(32));
      if (!same_mac(body.data() + 32, want))
        return fail(handshake_failure::bad_proof,
                    "the server does not know the cluster secret");
      append(transcript_, body);
      writer w;
      w.put<uint64_t>(me_.session);
      put_blob(w, me_.worker_address);
      auto mac = proof(secret_, "tessera client-proof v1", transcript_, w.out);
      w.bytes(mac.data(), mac.size());
      append(transcript_, w.out);
      step_ = step::wait_m4;
      return std::move(w.out);
    }
    case step::wait_m3: { // server
      if (body.size() < mac_bytes)
        return fail(handshake_failure::malformed, "a proof of the wrong length");
      auto signed_part = body.first(body.size() - mac_bytes);
      auto want = proof(secret_, "tessera client-proof v1", transcript_, signed_part);
      if (!same_mac(body.data() + signed_part.size(), want))
        return fail(handshake_failure::bad_proof,
                    "the client does not know the cluster secret (or replayed a handshake)");
      reader r2{signed_part.data(), signed_part.size()};
      peer_.session = r2.get<uint64_t>();
      auto len = r2.get<uint32_t>();
      auto* addr = r2.take(len);
      if (!r2.ok || r2.n != 0 || peer_.session == 0 || len == 0)
        return fail(handshake_failure::malformed, "a proof whose content does not parse");
      peer_.worker_address.assign(addr, addr + len);
      append(transcript_, body);
      writer w;
      put_string(w, me_.id);
      w.put<uint64_t>(me_.session);
      put_blob(w, me_.worker_address);
      auto mac = proof(secret_, "tessera server-final v1", transcript_, w.out);
      w.bytes(mac.data(), mac.size());
      step_ = step::done;
      return std::move(w.out);
    }
    case step::wait_m4: { // client
      if (body.size() < mac_bytes)
        return fail(handshake_failure::malformed, "a final message of the wrong length");
      auto signed_part = body.first(body.size() - mac_bytes);
      auto want = proof(secret_, "tessera server-final v1", transcript_, signed_part);
      if (!same_mac(body.data() + signed_part.size(), want))
        return fail(handshake_failure::bad_proof, "the server's final message does not verify");
      reader r2{signed_part.data(), signed_part.size()};
      auto id_len = r2.get<uint16_t>();
      auto* id = r2.take(id_len);
      peer_.session = r2.get<uint64_t>();
      auto len = r2.get<uint32_t>();
      auto* addr = r2.take(len);
      if (!r2.ok || r2.n != 0 || peer_.session == 0 || len == 0)
        return fail(handshake_failure::malformed, "a final message whose content does not parse");
      peer_.id.assign(reinterpret_cast<const char*>(id), id_len);
      peer_.worker_address.assign(addr, addr + len);
      step_ = step::done;
      return std::vector<std::byte>{};
    }
    case step::start:
    case step::done:
    case step::failed:
      break;
  }
  return fail(handshake_failure::malformed, "a message after the handshake ended");
}

} // namespace tessera::transport::detail
