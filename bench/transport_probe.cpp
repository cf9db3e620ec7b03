#include "bench/transport_probe.hpp"

#include <algorithm>
#include <condition_variable>
#include <cstdio>
#include <cstring>
#include <memory>
#include <mutex>
#include <optional>
#include <semaphore>
#include <thread>


#include <caf/sec.hpp>

#include "bench/cpu_usage.hpp"
#include "bench/stats.hpp"
#include "common/error.hpp"
#include "transport/ucx/ucx_transport.hpp"

namespace tessera::bench {

namespace tt = tessera::transport;

namespace {

using clock_type = std::chrono::steady_clock;

caf::error bench_error(const std::string& what) {
  return caf::make_error(caf::sec::runtime_error, "bench: " + what);
}

double us_between(clock_type::time_point a, clock_type::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

/// The end of one measurement phase, shared by the caller (who waits) and
/// the transport's callbacks (which finish it, once).
struct phase_signal {
  void finish(caf::error err = {}) {
    std::lock_guard lock{mu};
    if (done)
      return;
    done = true;
    error = std::move(err);
    cv.notify_all();
  }
  bool finished() {
    std::lock_guard lock{mu};
    return done;
  }
  caf::error wait(std::chrono::milliseconds timeout, const std::string& what) {
    std::unique_lock lock{mu};
    if (!cv.wait_for(lock, timeout, [this] { return done; }))
      return bench_error(what + ": no answer within " + std::to_string(timeout.count()) + " ms");
    return error;
  }

  std::mutex mu;
  std::condition_variable cv;
  bool done = false;
  caf::error error;
};

/// Routes the peer's messages to the running phase. Messages are handled
/// under a lock that install() also takes, so a phase's state is touched by
/// one thread at a time.
class probe_handler final : public tt::transport_handler {
public:
  using message_fn = std::function<void(tt::message&)>;

  /// Makes `fn` the message handler and `sig` the phase a peer failure
  /// ends, then runs `kick` (the phase's first sends) under the same lock.
  void install(message_fn fn, std::shared_ptr<phase_signal> sig, const std::function<void()>& kick) {
    std::lock_guard lock{mu_};
    fn_ = std::move(fn);
    sig_ = std::move(sig);
    if (failed_)
      sig_->finish(failed_);
    else if (kick)
      kick();
  }

  /// No phase: later messages are dropped.
  void clear() {
    std::lock_guard lock{mu_};
    fn_ = nullptr;
    sig_.reset();
  }

  void on_peer_connected(tt::peer_id, const std::string&) override {}
  void on_blocks_arrived(tt::peer_id, const tt::transfer_batch&) override {}

  void on_message(tt::peer_id, tt::message msg) override {
    std::lock_guard lock{mu_};
    if (fn_)
      fn_(msg);
  }

  void on_peer_failed(tt::peer_id, const caf::error& why) override {
    std::lock_guard lock{mu_};
    failed_ = why ? why : bench_error("peer failed");
    if (sig_)
      sig_->finish(failed_);
  }

private:
  std::mutex mu_;
  message_fn fn_;                   // guarded by mu_
  std::shared_ptr<phase_signal> sig_; // guarded by mu_
  caf::error failed_;               // guarded by mu_
};

struct probe_context {
  tt::transport& t;
  probe_handler& handler;
  tt::peer_id peer;
  const transport_probe_options& opts;
};

caf::error check_sequence(const tt::message& m, uint64_t want, uint64_t& got) {
  auto seq = control_sequence(m.frame);
  if (!seq)
    return seq.error();
  got = *seq;
  if (got != want)
    return bench_error("'" + m.actor + "' carried " + std::to_string(got) + ", expected "
                       + std::to_string(want));
  return {};
}

// Ping-pong: warm-up then measured round trips, driven from the callbacks.
// With `codec`, each end decodes the frame it got and encodes a new one;
// without, the peer sends the frame back as it came and we compare bytes
// (frames encoded before the clock starts).
caf::error measure_rtt(probe_context& c, bool codec, std::vector<double>& rtt_us) {
  struct state {
    int warmup = 0, total = 0, i = 0;
    clock_type::time_point sent;
    std::vector<double> us;
    std::vector<std::vector<std::byte>> frames; // without codec
  };
  auto st = std::make_shared<state>();
  st->warmup = c.opts.rtt_warmup;
  st->total = c.opts.rtt_warmup + c.opts.rtt_iterations;
  st->us.reserve(static_cast<size_t>(c.opts.rtt_iterations));
  if (!codec)
    for (int i = 0; i < st->total; ++i)
      st->frames.push_back(control_frame(static_cast<uint64_t>(i)));
  auto sig = std::make_shared<phase_signal>();
  auto ping = [&t = c.t, peer = c.peer, st, codec] {
    const auto i = static_cast<size_t>(st->i);
    st->sent = clock_type::now();
    if (codec)
      t.send(peer, tt::message{std::string{echo_actor}, control_frame(i)}, {});
    else
      t.send(peer, tt::message{std::string{echo_raw_actor}, st->frames[i]}, {});
  };
  c.handler.install(
    [st, sig, ping, codec](tt::message& m) {
      if (m.actor != (codec ? pong_actor : pong_raw_actor) || sig->finished())
        return;
      const auto now = clock_type::now();
      if (!codec) {
        if (m.frame != st->frames[static_cast<size_t>(st->i)])
          return sig->finish(bench_error("round trip " + std::to_string(st->i)
                                         + ": the frame came back changed"));
      } else if (uint64_t got = 0;
                 auto err = check_sequence(m, static_cast<uint64_t>(st->i), got)) {
        return sig->finish(err);
      }
      if (st->i >= st->warmup)
        st->us.push_back(us_between(st->sent, now));
      if (++st->i == st->total)
        return sig->finish();
      ping();
    },
    sig, ping);
  auto err = sig->wait(c.opts.phase_timeout, "round trips");
  c.handler.clear();
  rtt_us = std::move(st->us);
  return err;
}

// One-way stream of `n` messages from this thread; returns messages/s.
caf::expected<double> measure_stream(probe_context& c, int n) {
  struct state {
    explicit state(int window) : credits(window) {}
    std::counting_semaphore<1 << 20> credits;
    uint64_t acked = 0;
    clock_type::time_point end;
  };
  auto st = std::make_shared<state>(std::max(1, c.opts.stream_window));
  auto sig = std::make_shared<phase_signal>();
  c.handler.install(
    [st, sig](tt::message& m) {
      if (m.actor != sink_ack_actor)
        return;
      st->end = clock_type::now();
      auto seq = control_sequence(m.frame);
      if (!seq)
        return sig->finish(seq.error());
      st->acked = *seq;
      sig->finish();
    },
    sig, {});
  const auto start = clock_type::now();
  for (int i = 0; i < n && !sig->finished(); ++i) {
    st->credits.acquire();
    c.t.send(c.peer, tt::message{std::string{sink_actor}, control_frame(static_cast<uint64_t>(i))},
             [st, sig](const caf::error& err) {
               if (err)
                 sig->finish(err);
               st->credits.release();
             });
  }
  c.t.send(c.peer, tt::message{std::string{sink_end_actor}, control_frame(static_cast<uint64_t>(n))}, {});
  auto err = sig->wait(c.opts.phase_timeout, "message stream");
  c.handler.clear();
  if (err)
    return err;
  if (st->acked != static_cast<uint64_t>(n))
    return bench_error("the peer counted " + std::to_string(st->acked) + " of "
                       + std::to_string(n) + " messages");
  return n / (us_between(start, st->end) / 1e6);
}

struct batch_figures {
  double gb_s = 0;
  double batch_us_p50 = 0;
  double batch_us_p99 = 0;
  double batch_us_max = 0;
};

// `count` measured batches of `batch` (after warm-up), `window` in flight.
caf::expected<batch_figures> measure_batches(probe_context& c, tt::transfer_batch batch, int count) {
  struct state {
    tt::transfer_batch batch;
    int warmup = 0, total = 0, issued = 0, acked = 0;
    std::vector<clock_type::time_point> issued_at;
    std::vector<bool> was_acked;
    std::vector<double> us;
    clock_type::time_point start, end;
    // The ack path and transfer()'s done may run on different threads, and
    // done may run inside transfer() (on a progress thread): recursive, and
    // issue() queues rather than recurses while it is sending.
    std::recursive_mutex mu;
    std::function<void()> send_next;
    int to_issue = 0;
    bool issuing = false;
    void issue() {
      ++to_issue;
      if (issuing)
        return;
      issuing = true;
      while (to_issue > 0 && issued < total) {
        --to_issue;
        send_next();
      }
      to_issue = 0;
      issuing = false;
    }
  };
  auto st = std::make_shared<state>();
  st->batch = std::move(batch);
  st->warmup = c.opts.warmup_batches;
  st->total = st->warmup + count;
  st->issued_at.resize(static_cast<size_t>(st->total));
  st->was_acked.resize(static_cast<size_t>(st->total));
  auto sig = std::make_shared<phase_signal>();
  const bool by_done = !c.opts.peer_acks;
  // Batch `got` confirmed at `now` (under st->mu): time it, issue the next.
  auto acked = [sig](state& st, uint64_t got, clock_type::time_point now) {
    if (got >= static_cast<uint64_t>(st.issued) || st.was_acked[got])
      return sig->finish(bench_error("ack for batch " + std::to_string(got) + ", which "
                                     + (got >= static_cast<uint64_t>(st.issued)
                                          ? "was not sent"
                                          : "was acknowledged already")));
    st.was_acked[got] = true;
    if (st.acked >= st.warmup)
      st.us.push_back(us_between(st.issued_at[got], now));
    if (++st.acked == st.warmup)
      st.start = now;
    if (st.acked == st.total) {
      st.end = now;
      return sig->finish();
    }
    // With a window, the warm-up's tail overlaps the first measured
    // batches; start the clock only at the last warm-up ack (above).
    if (st.issued < st.total)
      st.issue();
  };
  // Only called under st->mu (by issue()). With by_done the batch is timed to
  // transfer()'s done: every block landed and, on the grant path, the
  // receiver acknowledged it (transport.hpp).
  st->send_next = [&t = c.t, peer = c.peer, st_w = std::weak_ptr<state>{st}, sig, by_done, acked] {
    auto st = st_w.lock();
    const auto k = static_cast<uint64_t>(st->issued++);
    st->batch.batch_id = k;
    st->issued_at[k] = clock_type::now();
    t.transfer(peer, st->batch, [st_w, sig, by_done, acked, k](const caf::error& err) {
      if (err)
        return sig->finish(err);
      auto st = st_w.lock();
      if (!by_done || !st || sig->finished())
        return;
      const auto now = clock_type::now();
      std::lock_guard lock{st->mu};
      acked(*st, k, now);
    });
  };
  const int window = std::max(1, c.opts.window);
  c.handler.install(
    [st, sig, acked, by_done](tt::message& m) {
      if (by_done || m.actor != blocks_ack_actor || sig->finished())
        return;
      const auto now = clock_type::now();
      // With more than one in flight, batches may land out of order (a
      // rendezvous run of one can overtake another's): each ack must name
      // a batch issued and not acknowledged yet.
      auto seq = ack_batch_id(m.frame);
      if (!seq)
        return sig->finish(seq.error());
      std::lock_guard lock{st->mu};
      acked(*st, *seq, now);
    },
    sig,
    [&] {
      std::lock_guard lock{st->mu};
      for (int i = 0; i < std::min(window, st->total); ++i)
        st->issue();
    });
  auto err = sig->wait(c.opts.phase_timeout, "block batches");
  c.handler.clear();
  if (err)
    return err;
  uint64_t bytes = 0;
  for (const auto& b : st->batch.blocks)
    bytes += b.size;
  batch_figures f;
  const double seconds = us_between(st->warmup > 0 ? st->start : st->issued_at[0], st->end) / 1e6;
  f.gb_s = static_cast<double>(bytes) * count / seconds / 1e9;
  f.batch_us_p50 = percentile(st->us, 50);
  f.batch_us_p99 = percentile(st->us, 99);
  f.batch_us_max = percentile(st->us, 100);
  return f;
}

// CPU use of this process and the peer over `window` with nothing sent.
void measure_idle_cpu(int peer_pid, std::chrono::milliseconds window, transport_probe_result& r) {
  const auto self0 = process_cpu_seconds(0);
  const auto peer0 = peer_pid > 0 ? process_cpu_seconds(peer_pid) : std::nullopt;
  const auto t0 = clock_type::now();
  std::this_thread::sleep_for(window); // the measurement is of doing nothing
  const double seconds = us_between(t0, clock_type::now()) / 1e6;
  if (auto self1 = process_cpu_seconds(0); self0 && self1)
    r.idle_cpu_pct_self = 100 * (*self1 - *self0) / seconds;
  if (auto peer1 = peer_pid > 0 ? process_cpu_seconds(peer_pid) : std::nullopt; peer0 && peer1)
    r.idle_cpu_pct_peer = 100 * (*peer1 - *peer0) / seconds;
}

// Blocks back to back in both regions; with `scatter`, the destination
// slots in reverse order, so that no block continues the one before it
// (the rendezvous path then sends one message per block, as for a request
// whose blocks are spread over the pool).
tt::transfer_batch make_batch(uint64_t batch_bytes, uint64_t block_bytes, tt::region_id src,
                              tt::region_id dst, bool scatter) {
  tt::transfer_batch b;
  for (uint64_t off = 0; off < batch_bytes; off += block_bytes) {
    const uint64_t size = std::min(block_bytes, batch_bytes - off);
    const uint64_t dst_off = scatter ? batch_bytes - off - size : off;
    b.blocks.push_back({src, off, dst, dst_off, size});
  }
  return b;
}

std::string fmt(const char* f, double a, double b = 0, double c = 0) {
  char buf[160];
  std::snprintf(buf, sizeof buf, f, a, b, c);
  return buf;
}

} // namespace

caf::expected<transport_probe_result>
run_transport_probe(const transport_selection& sel, const peer_announcement& peer_info,
                    const transport_probe_options& o,
                    const std::function<void(const std::string&)>& progress) {
  uint64_t max_batch = 0;
  for (auto b : o.batch_bytes)
    max_batch = std::max(max_batch, b);
  if (max_batch > peer_info.region_bytes)
    return bench_error("batches of " + std::to_string(max_batch) + " bytes do not fit the peer's "
                       + std::to_string(peer_info.region_bytes) + "-byte region");
  if (o.block_bytes == 0)
    return bench_error("block size must be positive");
  // Declared before the transport: registered memory must outlive it.
  std::vector<std::byte> heap;
  probe_handler handler;
  tt::ucx_options uopts;
  uopts.tls = sel.tls;
  uopts.peer_error_handling = sel.peer_error_handling;
  uopts.kv_path = sel.kv_path;
  if (o.progress_spin_us >= 0)
    uopts.progress_spin = std::chrono::microseconds{o.progress_spin_us};
  auto made = tt::ucx_transport::make(bench_transport_options(o.grants), uopts);
  if (!made)
    return made.error();
  auto& t = **made;
  t.set_handler(&handler);
  auto src_region = bench_region(t, o.allocated_regions, std::max<uint64_t>(max_batch, 1),
                                std::byte{0xa5}, heap);
  if (!src_region)
    return src_region.error();
  auto src = src_region->id;
  auto peer = t.connect(peer_info.address);
  if (!peer)
    return peer.error();
  probe_context c{t, handler, *peer, o};
  transport_probe_result r;
  r.control_frame_bytes = control_frame(0).size();
  r.kv_path = std::string{tt::to_string(t.kv_path_to(*peer))};

  std::vector<double> rtt;
  if (auto err = measure_rtt(c, false, rtt))
    return err;
  r.rtt_us_p50 = percentile(rtt, 50);
  r.rtt_us_p99 = percentile(rtt, 99);
  r.rtt_us_max = percentile(rtt, 100);
  progress(fmt("round trip p50 %.1f us, p99 %.1f us, max %.0f us", r.rtt_us_p50, r.rtt_us_p99,
               r.rtt_us_max));
  if (auto err = measure_rtt(c, true, rtt))
    return err;
  r.rtt_codec_us_p50 = percentile(rtt, 50);
  r.rtt_codec_us_p99 = percentile(rtt, 99);
  progress(fmt("round trip with decode + encode at each end p50 %.1f us, p99 %.1f us",
               r.rtt_codec_us_p50, r.rtt_codec_us_p99));

  if (auto warm = measure_stream(c, o.msgs_warmup); !warm)
    return warm.error();
  auto rate = measure_stream(c, o.msgs);
  if (!rate)
    return rate.error();
  r.msgs_per_s = *rate;
  progress(fmt("%.0f messages/s", r.msgs_per_s));

  for (auto bytes : o.batch_bytes) {
    const int count = static_cast<int>(std::clamp<uint64_t>(o.target_bytes / bytes,
                                                            static_cast<uint64_t>(o.min_batches),
                                                            static_cast<uint64_t>(o.max_batches)));
    auto blocks = make_batch(bytes, o.block_bytes, src, peer_info.region, o.scatter_blocks);
    const double n_blocks = static_cast<double>(blocks.blocks.size());
    auto f = measure_batches(c, std::move(blocks), count);
    if (!f)
      return f.error();
    r.block_gb_s[bytes] = f->gb_s;
    r.batch_us_p50[bytes] = f->batch_us_p50;
    r.batch_us_p99[bytes] = f->batch_us_p99;
    r.batch_us_max[bytes] = f->batch_us_max;
    progress(fmt(n_blocks == 1 ? "%.0f KiB batches (%.0f block): %.2f GB/s"
                               : "%.0f KiB batches (%.0f blocks): %.2f GB/s",
                 static_cast<double>(bytes >> 10), n_blocks, f->gb_s)
             + fmt(", batch p50 %.0f us, p99 %.0f us, max %.0f us", f->batch_us_p50,
                   f->batch_us_p99, f->batch_us_max));
    if (o.one_block_batches && bytes <= o.block_bytes)
      r.one_block_gb_s[bytes] = f->gb_s; // the batch above was one block already
    if (o.one_block_batches && bytes > o.block_bytes) {
      auto one = measure_batches(c, make_batch(bytes, bytes, src, peer_info.region, false), count);
      if (!one)
        return one.error();
      r.one_block_gb_s[bytes] = one->gb_s;
      progress(fmt("%.0f KiB batches (1 block): %.2f GB/s", static_cast<double>(bytes >> 10),
                   one->gb_s));
    }
  }
  measure_idle_cpu(peer_info.pid, o.idle_window, r);
  progress(fmt("idle with the connection open: this process %.0f%% of a core, the peer %.0f%%",
               r.idle_cpu_pct_self, r.idle_cpu_pct_peer));
  return r;
}

} // namespace tessera::bench
