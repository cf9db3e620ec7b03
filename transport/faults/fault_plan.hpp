#pragma once
/// @file
/// fault_plan: what a fault_transport injects, as a seeded list of rules.
///
/// Each send or transfer through the decorator is one operation. For every
/// operation, each rule whose filters match (op kind, peer) counts it
/// (its `n`, from 1) and decides whether it fires:
///
///   active  = n >= from  and  now - start >= after  and  fires < limit
///   fires   = active and (every == 0 or n % every == 0)
///                    and (probability unset or draw < probability)
///
/// A rule with a probability draws one number from the plan's generator
/// (splitmix64 seeded with `seed`) for every operation its filters match,
/// fired or not, so the draws depend only on the operation sequence. Every rule is evaluated; the first rule
/// (in plan order) that fires decides the operation's fault; one fault per
/// operation. Same plan + seed + operation sequence => same faults.
///
/// Compact text form (fault_plan::parse), rules separated by ';':
///
///   seed=42; drop,op=send,every=3; delay,ms=20,p=0.25;
///   partition,peer=2,from=10,limit=1; fail,op=transfer,every=5,err=peer_failed
///
/// Keys: op=send|transfer|any (default any), every=N, p=0..1, peer=ID
/// (a number: the decorator's peer id; else the peer's proven identity,
/// e.g. peer=decode-a),
/// from=N, after_ms=MS, limit=N, ms=MS (delay), err=<transport_errc name>
/// (fail; default injected_fault).

#include <array>
#include <chrono>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <caf/expected.hpp>

#include "transport/transport.hpp"

namespace tessera::transport {

/// What a rule does to the operation it fires on.
enum class fault_kind : uint8_t {
  /// Send: the message vanishes; its completion reports success (a lossy
  /// network). Transfer: nothing is copied; completes with `timeout`
  /// (a lost RMA is noticed only by its deadline).
  drop,
  /// Forwarded `delay` later (from the decorator's timer); otherwise
  /// unchanged. Later operations may overtake it.
  delay,
  /// Forwarded twice; the receiver sees the message / batch twice. The
  /// completion runs once, after both (first error wins).
  duplicate,
  /// Held back and forwarded right after the next operation to the same
  /// peer (a swapped pair). flush() releases held operations early.
  reorder,
  /// Send: one byte of the frame is XORed with a nonzero seeded value.
  /// Transfer: one seeded byte of the first non-empty block is flipped in
  /// the bytes that land at the destination (the source is untouched).
  corrupt,
  /// Not forwarded; completes with the rule's `error` (injected_fault).
  fail,
  /// The operation's peer is partitioned until heal(): this and every later
  /// operation to it complete with peer_unreachable, and its messages and
  /// batches to us are dropped.
  partition,
};

/// Number of fault kinds (for counters indexed by kind).
inline constexpr size_t fault_kind_count = static_cast<size_t>(fault_kind::partition) + 1;

/// "drop", "delay", ...
[[nodiscard]] const char* to_string(fault_kind k);

/// Which operations a rule applies to.
enum class fault_op : uint8_t { send = 1, transfer = 2, any = 3 };

/// "send", "transfer", "any".
[[nodiscard]] const char* to_string(fault_op op);

/// One rule of a plan.
struct fault_rule {
  fault_kind kind = fault_kind::drop;
  /// Operations the rule counts and may fire on. Default: any.
  fault_op ops = fault_op::any;
  /// Fire on every Nth matching operation (N, 2N, ...); 0 = every one.
  /// Default: 0.
  uint64_t every = 0;
  /// Fire with this probability (0..1) among the operations `every` allows;
  /// unset = always. Default: unset.
  std::optional<double> probability;
  /// Only operations to this peer (the decorator's peer ids). Default: all.
  std::optional<peer_id> peer;
  /// Only operations to the peer that proved this identity (its node id,
  /// transport::peer_identity; `peer=NAME` in the text form, a peer=
  /// value that is not a number). Default: empty (all).
  std::string peer_name;
  /// Inactive before the Nth matching operation. Default: 1.
  uint64_t from = 1;
  /// Inactive until this long after the decorator was created (by its
  /// clock). Default: 0.
  std::chrono::milliseconds after{0};
  /// Fires at most this many times; 0 = unlimited. Default: 0.
  uint64_t limit = 0;
  /// How long `delay` holds an operation. Default: 10 ms.
  std::chrono::milliseconds delay{10};
  /// The error `fail` completes with. Default: injected_fault.
  transport_errc error = transport_errc::injected_fault;
};

/// A seeded list of rules. Plain data; copy freely.
struct fault_plan {
  /// Seeds the plan's generator. Default: 0.
  uint64_t seed = 0;
  std::vector<fault_rule> rules;

  /// Parses the compact text form (see the file comment). Errors:
  /// invalid_message naming the rule and key at fault.
  [[nodiscard]] static caf::expected<fault_plan> parse(std::string_view text);

  /// The compact text form; parse(to_string()) gives an equal plan.
  [[nodiscard]] std::string to_string() const;
};

/// splitmix64: the plan's deterministic generator.
class fault_rng {
public:
  explicit fault_rng(uint64_t seed) : state_(seed) {}
  /// The next 64 random bits.
  uint64_t next() {
    uint64_t z = (state_ += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
  }
  /// Uniform in [0, 1).
  double uniform() { return static_cast<double>(next() >> 11) * 0x1.0p-53; }

private:
  uint64_t state_;
};

} // namespace tessera::transport
