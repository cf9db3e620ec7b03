// The cluster handshake as a state machine: both sides with the secret
// authenticate each other; every way an attacker can get it wrong (no
// secret, a wrong one, a replayed or tampered message, garbage, a message
// too long) fails with its reason and reveals nothing of the server.

#include <gtest/gtest.h>

#include <cstring>

#include "transport/ucx/ucx_handshake.hpp"

namespace {

using namespace tessera::transport::detail;

std::vector<std::byte> bytes(const std::string& s) {
  std::vector<std::byte> out(s.size());
  std::memcpy(out.data(), s.data(), s.size());
  return out;
}

handshake_offer offer(const std::string& id, const std::string& addr) {
  return {id, bytes(addr), random_session()};
}

/// Runs a whole handshake; returns the four messages.
std::vector<std::vector<std::byte>> run(handshake& c, handshake& s) {
  std::vector<std::vector<std::byte>> msgs;
  msgs.push_back(c.start());
  auto m2 = s.on_message(msgs[0]);
  EXPECT_TRUE(m2) << (m2 ? "" : caf::to_string(m2.error()));
  msgs.push_back(*m2);
  auto m3 = c.on_message(msgs[1]);
  EXPECT_TRUE(m3) << (m3 ? "" : caf::to_string(m3.error()));
  msgs.push_back(*m3);
  auto m4 = s.on_message(msgs[2]);
  EXPECT_TRUE(m4) << (m4 ? "" : caf::to_string(m4.error()));
  msgs.push_back(*m4);
  auto end = c.on_message(msgs[3]);
  EXPECT_TRUE(end) << (end ? "" : caf::to_string(end.error()));
  return msgs;
}

bool contains(const std::vector<std::byte>& hay, const std::vector<std::byte>& needle) {
  return std::search(hay.begin(), hay.end(), needle.begin(), needle.end()) != hay.end();
}

TEST(UcxHandshakeTest, BothSidesWithTheSecretLearnEachOthersIdAddressAndSession) {
  auto co = offer("decode", "client-worker-address");
  auto so = offer("front", "server-worker-address");
  handshake c{handshake::role::client, "s3cret-s3cret-s3cret", co};
  handshake s{handshake::role::server, "s3cret-s3cret-s3cret", so};
  run(c, s);
  ASSERT_TRUE(c.done());
  ASSERT_TRUE(s.done());
  EXPECT_EQ(s.peer().id, "decode");
  EXPECT_EQ(s.peer().worker_address, co.worker_address);
  EXPECT_EQ(s.peer().session, co.session);
  EXPECT_EQ(c.peer().id, "front");
  EXPECT_EQ(c.peer().worker_address, so.worker_address);
  EXPECT_EQ(c.peer().session, so.session);
}

TEST(UcxHandshakeTest, AServerWithoutTheSecretIsCaughtBeforeTheClientRevealsItsAddress) {
  auto co = offer("decode", "client-worker-address");
  handshake c{handshake::role::client, "right-secret-0123456789", co};
  handshake s{handshake::role::server, "wrong-secret-0123456789", offer("x", "server-address")};
  auto m2 = s.on_message(c.start());
  ASSERT_TRUE(m2);
  auto m3 = c.on_message(*m2);
  ASSERT_FALSE(m3);
  EXPECT_EQ(c.failure(), handshake_failure::bad_proof);
  EXPECT_NE(caf::to_string(m3.error()).find("bad_proof"), std::string::npos);
}

TEST(UcxHandshakeTest, AClientWithAWrongSecretLearnsNothingOfTheServer) {
  auto so = offer("front-node-id", "server-worker-address");
  handshake s{handshake::role::server, "right-secret-0123456789", so};
  handshake c{handshake::role::client, "right-secret-0123456789", offer("rogue", "rogue-address")};
  auto m1 = c.start();
  auto m2 = s.on_message(m1);
  ASSERT_TRUE(m2);
  // Nothing of the server so far but a nonce and a MAC.
  EXPECT_FALSE(contains(*m2, so.worker_address));
  EXPECT_FALSE(contains(*m2, bytes(so.id)));
  // An attacker who knows the format but not the secret forges M3.
  handshake forger{handshake::role::client, "guessed-secret-000000000", offer("rogue", "rogue")};
  // The forger's transcript must be the real one: replay M1 and M2 to it.
  handshake s2{handshake::role::server, "right-secret-0123456789", so};
  auto fm1 = forger.start();
  auto fm2 = s2.on_message(fm1);
  ASSERT_TRUE(fm2);
  // The forger cannot verify M2 (wrong secret) ...
  EXPECT_FALSE(forger.on_message(*fm2));
  // ... and an M3 built by a client with another secret does not verify.
  handshake other_c{handshake::role::client, "guessed-secret-000000000", offer("rogue", "rogue")};
  handshake other_s{handshake::role::server, "guessed-secret-000000000", offer("x", "y")};
  auto om2 = other_s.on_message(other_c.start());
  auto om3 = other_c.on_message(*om2);
  ASSERT_TRUE(om3);
  auto r = s2.on_message(*om3);
  ASSERT_FALSE(r);
  EXPECT_EQ(s2.failure(), handshake_failure::bad_proof);
}

TEST(UcxHandshakeTest, ACapturedHandshakeReplayedToTheServerFails) {
  const std::string k = "cluster-secret-0123456789";
  auto so = offer("front", "server-worker-address");
  handshake c{handshake::role::client, k, offer("decode", "client-address")};
  handshake s{handshake::role::server, k, so};
  auto msgs = run(c, s);
  // The eavesdropper replays M1, then M3, to a fresh server handshake: the
  // server's new nonce makes the old proof worthless.
  handshake s2{handshake::role::server, k, so};
  ASSERT_TRUE(s2.on_message(msgs[0]));
  auto r = s2.on_message(msgs[2]);
  ASSERT_FALSE(r);
  EXPECT_EQ(s2.failure(), handshake_failure::bad_proof);
  EXPECT_FALSE(s2.done());
}

TEST(UcxHandshakeTest, ATamperedMessageFailsItsProof) {
  const std::string k = "cluster-secret-0123456789";
  handshake c{handshake::role::client, k, offer("decode", "client-address")};
  handshake s{handshake::role::server, k, offer("front", "server-address")};
  auto m2 = s.on_message(c.start());
  ASSERT_TRUE(m2);
  auto m3 = c.on_message(*m2);
  ASSERT_TRUE(m3);
  // Redirect the server to another worker address: one byte changed.
  (*m3)[12] ^= std::byte{1};
  auto r = s.on_message(*m3);
  ASSERT_FALSE(r);
  EXPECT_EQ(s.failure(), handshake_failure::bad_proof);
}

TEST(UcxHandshakeTest, GarbageTruncatedAndOversizedFirstMessagesAreRefusedByReason) {
  handshake s1{handshake::role::server, "k-0123456789abcdef", offer("front", "a")};
  std::vector<std::byte> seventeen(17, std::byte{0});
  ASSERT_FALSE(s1.on_message(seventeen));
  EXPECT_EQ(s1.failure(), handshake_failure::malformed);

  handshake c{handshake::role::client, "k-0123456789abcdef", offer("decode", "b")};
  auto m1 = c.start();
  handshake s2{handshake::role::server, "k-0123456789abcdef", offer("front", "a")};
  ASSERT_FALSE(s2.on_message(std::span<const std::byte>{m1}.first(m1.size() - 1)));
  EXPECT_EQ(s2.failure(), handshake_failure::malformed);

  handshake s3{handshake::role::server, "k-0123456789abcdef", offer("front", "a")};
  std::vector<std::byte> huge(max_handshake_message_bytes + 1, std::byte{'T'});
  ASSERT_FALSE(s3.on_message(huge));
  EXPECT_EQ(s3.failure(), handshake_failure::oversize);

  // A node id longer than the wire allows.
  handshake c4{handshake::role::client, "k-0123456789abcdef",
               offer(std::string(max_handshake_id_bytes + 1, 'n'), "b")};
  handshake s4{handshake::role::server, "k-0123456789abcdef", offer("front", "a")};
  ASSERT_FALSE(s4.on_message(c4.start()));
  EXPECT_EQ(s4.failure(), handshake_failure::oversize);
}

TEST(UcxHandshakeTest, AServerProofIsNotAcceptedAsAClientProof) {
  // Reflection: the server's own MAC sent back as the client's proof.
  const std::string k = "cluster-secret-0123456789";
  handshake c{handshake::role::client, k, offer("decode", "client-address")};
  handshake s{handshake::role::server, k, offer("front", "server-address")};
  auto m2 = s.on_message(c.start());
  ASSERT_TRUE(m2);
  auto r = s.on_message(*m2);
  ASSERT_FALSE(r);
  EXPECT_FALSE(s.done());
}

TEST(UcxHandshakeTest, HmacMatchesTheRfc4231TestVector) {
  // RFC 4231 test case 2: key "Jefe", data "what do ya want for nothing?".
  auto mac = hmac_sha256("Jefe", bytes("what do ya want for nothing?"));
  const unsigned char want[] = {0x5b, 0xdc, 0xc1, 0x46, 0xbf, 0x60, 0x75, 0x4e, 0x6a, 0x04, 0x24,
                                0x26, 0x08, 0x95, 0x75, 0xc7, 0x5a, 0x00, 0x3f, 0x08, 0x9d, 0x27,
                                0x39, 0x83, 0x9d, 0xec, 0x58, 0xb9, 0x64, 0xec, 0x38, 0x43};
  EXPECT_EQ(std::memcmp(mac.data(), want, 32), 0);
}

} // namespace
