// ucx_core's KV transfers: registered regions and their rkeys (announced
// in HELLO / HELLO_ACK and in one message per later region), the checks of
// a batch and the choice of path; the put path: one-sided puts, the
// endpoint flush that orders them before the "blocks arrived" message, and
// that message's receipt. (The rendezvous path: ucx_transfer_rndv.cpp.)

#include "transport/ucx/ucx_core.hpp"

#include <algorithm>
#include <atomic>
#include <cstring>

namespace tessera::transport::detail {

caf::expected<region_id> ucx_core::register_region(std::span<std::byte> memory) {
  if (memory.empty())
    return make_transport_error(transport_errc::invalid_message, "ucx: empty region");
  return call<region_id>([this, memory]() -> caf::expected<region_id> {
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
    mp.address = memory.data();
    mp.length = memory.size();
    ucp_mem_h memh = nullptr;
    auto st = ucp_mem_map(context_, &mp, &memh);
    if (st != UCS_OK)
      return ucx_error(transport_errc::invalid_message, "ucp_mem_map", st);
    // Same-host peers put into it through process_vm_writev (cma).
    return add_region(memh, memory, map_local(memory));
  });
}

caf::expected<allocated_region> ucx_core::allocate_region(uint64_t bytes) {
  if (bytes == 0)
    return make_transport_error(transport_errc::invalid_message, "ucx: empty region");
  return call<allocated_region>([this, bytes]() -> caf::expected<allocated_region> {
    // UCX allocates with the first of its allocation methods that works
    // (UCX_MEM_ALLOC_METHODS; by default a sysv or posix shared-memory
    // segment, then huge pages, then mmap): memory its sm transports
    // attach at the peer, so that a put into it is a memcpy.
    // With the same-host path, its context allocates (its sm transports
    // are the ones that attach the segment; the cluster context maps the
    // memory it got).
    auto* ctx = local_context_ != nullptr ? local_context_ : context_;
    ucp_mem_map_params_t mp{};
    mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH
                    | UCP_MEM_MAP_PARAM_FIELD_FLAGS;
    mp.address = nullptr;
    mp.length = bytes;
    mp.flags = UCP_MEM_MAP_ALLOCATE;
    ucp_mem_h memh = nullptr;
    auto st = ucp_mem_map(ctx, &mp, &memh);
    if (st != UCS_OK)
      return ucx_error(transport_errc::unavailable,
                       "ucp_mem_map (allocate " + std::to_string(bytes) + " bytes)", st);
    ucp_mem_attr_t attr{};
    attr.field_mask = UCP_MEM_ATTR_FIELD_ADDRESS | UCP_MEM_ATTR_FIELD_LENGTH;
    st = ucp_mem_query(memh, &attr);
    if (st != UCS_OK) {
      ucp_mem_unmap(ctx, memh);
      return ucx_error(transport_errc::unavailable, "ucp_mem_query", st);
    }
    // UCX may round the length up; the region is what was asked for.
    std::span<std::byte> memory{static_cast<std::byte*>(attr.address), bytes};
    ucp_mem_h local_memh = nullptr;
    if (ctx == local_context_) {
      local_memh = memh;
      mp.field_mask = UCP_MEM_MAP_PARAM_FIELD_ADDRESS | UCP_MEM_MAP_PARAM_FIELD_LENGTH;
      mp.address = memory.data();
      mp.flags = 0;
      st = ucp_mem_map(context_, &mp, &memh);
      if (st != UCS_OK) {
        ucp_mem_unmap(local_context_, local_memh);
        return ucx_error(transport_errc::unavailable, "ucp_mem_map (allocated memory)", st);
      }
    }
    auto id = add_region(memh, memory, local_memh);
    if (!id)
      return id.error();
    return allocated_region{*id, memory};
  });
}

caf::expected<region_id> ucx_core::add_region(ucp_mem_h memh, std::span<std::byte> memory,
                                              ucp_mem_h local_memh) {
  auto unmap = [&] {
    ucp_mem_unmap(context_, memh);
    if (local_memh != nullptr)
      ucp_mem_unmap(local_context_, local_memh);
  };
  auto pack = [](ucp_context_h ctx, ucp_mem_h h, std::vector<std::byte>& out) {
    void* buf = nullptr;
    size_t len = 0;
    auto st = ucp_rkey_pack(ctx, h, &buf, &len);
    if (st == UCS_OK) {
      auto* b = static_cast<const std::byte*>(buf);
      out.assign(b, b + len);
      ucp_rkey_buffer_release(buf);
    }
    return st;
  };
  local_region r;
  auto st = pack(context_, memh, r.rkey);
  if (st == UCS_OK && local_memh != nullptr)
    st = pack(local_context_, local_memh, r.local_rkey);
  if (st != UCS_OK) {
    unmap();
    return ucx_error(transport_errc::invalid_message, "ucp_rkey_pack", st);
  }
  r.id = next_region_++;
  r.memory = memory;
  r.memh = memh;
  r.local_memh = local_memh;
  regions_.emplace(r.id, r);
  writer w;
  encode_region(w, regions_.at(r.id), opts_.grants_only ? std::span<const std::byte>{} : r.rkey);
  for (auto& [pid, p] : peers_)
    if (p.state != peer_state::failed) {
      am_send(p, am_region, {}, w.out, {});
      send_local_regions(p, {r.id});
    }
  return r.id;
}

void ucx_core::encode_region(writer& w, const local_region& r, std::span<const std::byte> key) {
  w.put<uint32_t>(r.id);
  w.put<uint64_t>(reinterpret_cast<uintptr_t>(r.memory.data()));
  w.put<uint64_t>(r.memory.size());
  w.put<uint32_t>(static_cast<uint32_t>(key.size()));
  w.bytes(key.data(), key.size());
}

void ucx_core::encode_regions(writer& w) {
  w.put<uint32_t>(static_cast<uint32_t>(regions_.size()));
  // With grants_only no key to the whole region leaves this process over
  // the cluster endpoint (same-host keys: send_local_regions).
  for (auto& [id, r] : regions_)
    encode_region(w, r, opts_.grants_only ? std::span<const std::byte>{} : r.rkey);
}

bool ucx_core::decode_region(peer& p, reader& rd) {
  auto id = rd.get<uint32_t>();
  auto base = rd.get<uint64_t>();
  auto size = rd.get<uint64_t>();
  auto len = rd.get<uint32_t>();
  auto* buf = rd.take(len);
  if (!rd.ok || !p.ep)
    return false;
  if (p.regions.size() >= max_peer_regions && !p.regions.contains(id)) {
    refuse_peer(p, rejection::not_granted,
                "over " + std::to_string(max_peer_regions) + " regions announced");
    return false;
  }
  // Without a key (grants_only on either side) the region is known by
  // size only: blocks go to it by rendezvous, never by put.
  ucp_rkey_h rkey = nullptr;
  if (len > 0 && !opts_.grants_only && ucp_ep_rkey_unpack(p.ep, buf, &rkey) != UCS_OK)
    return false;
  // Its same-host key (on_local_regions) stays as it is.
  auto& r = p.regions[id];
  if (r.rkey != nullptr)
    ucp_rkey_destroy(r.rkey);
  r.base = base;
  r.size = size;
  r.rkey = rkey;
  r.mapped = mapping_of(rkey, base, size);
  return true;
}

std::byte* ucx_core::mapping_of(ucp_rkey_h rkey, uint64_t base, uint64_t size) {
  void* first = nullptr;
  void* last = nullptr;
  if (rkey == nullptr || size == 0 || base + (size - 1) < base
      || ucp_rkey_ptr(rkey, base, &first) != UCS_OK
      || ucp_rkey_ptr(rkey, base + (size - 1), &last) != UCS_OK
      || static_cast<std::byte*>(last) != static_cast<std::byte*>(first) + (size - 1))
    return nullptr;
  return static_cast<std::byte*>(first);
}

void ucx_core::decode_regions(peer& p, reader& rd) {
  auto n = rd.get<uint32_t>();
  for (uint32_t i = 0; i < n && rd.ok; ++i)
    decode_region(p, rd);
}

void ucx_core::transfer(peer_id to, transfer_batch batch, completion done) {
  auto b = std::make_shared<transfer_batch>(std::move(batch));
  if (may_run_inline())
    return start_transfer(to, b, done, true);
  if (!post([this, to, b, done] { start_transfer(to, b, done, true); }))
    if (done)
      done(closed_error());
}

void ucx_core::transfer_unchecked(peer_id to, transfer_batch batch, completion done) {
  auto b = std::make_shared<transfer_batch>(std::move(batch));
  if (!post([this, to, b, done] { start_transfer(to, b, done, false); }))
    if (done)
      done(closed_error());
}

void ucx_core::on_put_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<pending_op*>(user_data);
  ucp_request_free(request);
  --op->outstanding;
  if (status != UCS_OK && op->status == UCS_OK)
    op->status = status;
  if (status == UCS_OK)
    op->self->note_progress(op->peer);
  op->self->release_op(op);
}

void ucx_core::on_flush_done(void* request, ucs_status_t status, void* user_data) {
  auto* op = static_cast<pending_op*>(user_data);
  ucp_request_free(request);
  --op->outstanding;
  if (status != UCS_OK && op->status == UCS_OK)
    op->status = status;
  if (status == UCS_OK)
    op->self->note_progress(op->peer);
  op->self->after_flush(op);
}

void ucx_core::start_transfer(peer_id to, const std::shared_ptr<transfer_batch>& b,
                              const completion& done, bool checked) {
  auto* p = usable_peer(to, done);
  if (!p)
    return;
  if (auto err = check_batch(*p, *b, checked)) {
    if (done)
      done(err);
    return;
  }
  // A same-host peer (ucx_same_host_rma.cpp) gets puts over shared
  // memory into the regions it gave us keys to.
  if (checked && same_host_keyed(*p, *b))
    return start_put_transfer(*p, b, done, true);
  // An empty batch has no run to carry it: the put path's flush and
  // notice do. A peer that announced its regions without keys
  // (grants_only) takes every block by rendezvous.
  const bool keyed = std::all_of(b->blocks.begin(), b->blocks.end(), [&](const block_copy& c) {
    auto r = p->regions.find(c.dst);
    return r != p->regions.end() && r->second.rkey != nullptr;
  });
  if (b->blocks.empty() || (checked && keyed && kv_path_ != ucx_kv_path::am_rndv))
    return start_put_transfer(*p, b, done);
  auto runs = kv_runs(b->blocks);
  if (checked && keyed && kv_path_by_batch_ && !rndv_pays(runs, ucx_.rndv_min_run_bytes))
    return start_put_transfer(*p, b, done);
  start_rndv_transfer(*p, b, std::move(runs), done);
}

caf::error ucx_core::check_batch(const peer& p, const transfer_batch& b, bool destinations) {
  for (size_t i = 0; i < b.blocks.size(); ++i) {
    const auto& blk = b.blocks[i];
    auto bad = [&](const std::string& why) {
      return make_transport_error(transport_errc::invalid_message,
                                  "ucx: batch " + std::to_string(b.batch_id) + " block "
                                    + std::to_string(i) + ": " + why);
    };
    auto src = regions_.find(blk.src);
    if (src == regions_.end())
      return bad("unknown local region " + std::to_string(blk.src));
    if (blk.size == 0)
      return bad("empty block");
    auto range = [&](uint64_t off) {
      // Appended piecewise: `"[" + std::to_string(...)` trips GCC 12's
      // -Wrestrict false positive (GCC PR 105651) once inlined here.
      std::string r{"["};
      r += std::to_string(off);
      r += ", ";
      r += std::to_string(off + blk.size);
      r += ")";
      return r;
    };
    if (blk.src_offset > src->second.memory.size()
        || blk.size > src->second.memory.size() - blk.src_offset)
      return bad("source range " + range(blk.src_offset) + " outside local region "
                 + std::to_string(blk.src) + " of " + std::to_string(src->second.memory.size())
                 + " bytes");
    if (!destinations)
      continue;
    auto dst = p.regions.find(blk.dst);
    if (dst == p.regions.end())
      return bad("unknown peer region " + std::to_string(blk.dst));
    if (blk.dst_offset > dst->second.size || blk.size > dst->second.size - blk.dst_offset)
      return bad("destination range " + range(blk.dst_offset) + " outside peer region "
                 + std::to_string(blk.dst) + " of " + std::to_string(dst->second.size)
                 + " bytes");
  }
  return {};
}

void ucx_core::start_put_transfer(peer& pr, const std::shared_ptr<transfer_batch>& b,
                                  const completion& done, bool local) {
  auto* p = &pr;
  auto to = p->id;
  auto* ep = local ? p->local_ep : p->ep;
  if (local)
    local_put_batches_.fetch_add(1, std::memory_order_relaxed);
  // Where every destination is mapped into this process (the peer's
  // shared-memory segment, attached by its key: what UCX's own put over
  // sysv/posix does with a memcpy), the blocks are copied here, and each
  // copy is complete when it returns: no put request, no flush, the
  // notice right after. Anything else takes UCX puts and the flush (an
  // empty batch too, whose flush still orders it after earlier puts).
  auto mapping = [&](const block_copy& c) {
    const auto& dst = p->regions.at(c.dst);
    return local ? dst.local_mapped : dst.mapped;
  };
  const bool mapped = !b->blocks.empty()
                      && std::all_of(b->blocks.begin(), b->blocks.end(),
                                     [&](const block_copy& c) { return mapping(c) != nullptr; });
  if (mapped) {
    // check_batch kept every [dst_offset, dst_offset + size) inside the
    // region's announced size, as for a put.
    for (const auto& blk : b->blocks)
      std::memcpy(mapping(blk) + blk.dst_offset,
                  regions_.at(blk.src).memory.data() + blk.src_offset, blk.size);
    // Every store (non-temporal ones of a large memcpy included) is
    // globally visible before the notice is written.
    std::atomic_thread_fence(std::memory_order_seq_cst);
    mapped_put_batches_.fetch_add(1, std::memory_order_relaxed);
    return send_batch_notice(*p, *b, done);
  }
  auto* op = new_op(to, done);
  op->batch = b;
  ++op->outstanding; // held until the flush is issued
  for (const auto& blk : b->blocks) {
    auto& src = regions_.at(blk.src);
    auto& dst = p->regions.at(blk.dst);
    ucp_request_param_t rp{};
    rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA
                      | UCP_OP_ATTR_FIELD_MEMH;
    rp.cb.send = &ucx_core::on_put_done;
    rp.user_data = op;
    rp.memh = local ? src.local_memh : src.memh;
    auto* req = ucp_put_nbx(ep, src.memory.data() + blk.src_offset, blk.size,
                            dst.base + blk.dst_offset, local ? dst.local_rkey : dst.rkey, &rp);
    if (!op->hold(req))
      break;
  }
  --op->outstanding;
  if (op->status != UCS_OK) {
    finish_op(op, status_error(op, op->status));
    release_op(op);
    return;
  }
  ucp_request_param_t rp{};
  rp.op_attr_mask = UCP_OP_ATTR_FIELD_CALLBACK | UCP_OP_ATTR_FIELD_USER_DATA;
  rp.cb.send = &ucx_core::on_flush_done;
  rp.user_data = op;
  // Flushed on the endpoint the puts took; the notice then goes on the
  // cluster endpoint (after_flush), so it follows the data either way.
  auto* req = ucp_ep_flush_nbx(ep, &rp);
  if (UCS_PTR_IS_ERR(req)) {
    op->status = UCS_PTR_STATUS(req);
    after_flush(op);
  } else if (req == nullptr) {
    after_flush(op);
  } else {
    ++op->outstanding;
  }
}

void ucx_core::after_flush(pending_op* op) {
  if (op->finished || op->status != UCS_OK) {
    finish_op(op, status_error(op, op->status));
    release_op(op);
    return;
  }
  auto it = peers_.find(op->peer);
  if (it == peers_.end() || it->second.state != peer_state::connected) {
    finish_op(op, status_error(op, UCS_ERR_CONNECTION_RESET));
    release_op(op);
    return;
  }
  auto done = std::move(op->done);
  op->finished = true;
  auto batch = std::move(op->batch);
  release_op(op);
  send_batch_notice(it->second, *batch, std::move(done));
}

void ucx_core::send_batch_notice(peer& p, const transfer_batch& b, completion done) {
  writer w;
  w.out.reserve(12 + b.blocks.size() * block_copy_bytes);
  w.put<uint64_t>(b.batch_id);
  w.put<uint32_t>(static_cast<uint32_t>(b.blocks.size()));
  for (const auto& blk : b.blocks)
    put_block_copy(w, blk);
  am_send(p, am_batch, {}, std::move(w.out), std::move(done));
}

void ucx_core::on_batch(peer& p, reader& rd) {
  transfer_batch batch;
  batch.batch_id = rd.get<uint64_t>();
  auto n = rd.get<uint32_t>();
  if (rd.ok && n <= rd.n / block_copy_bytes)
    batch.blocks.reserve(n);
  for (uint32_t i = 0; i < n && rd.ok; ++i)
    batch.blocks.push_back(get_block_copy(rd));
  // With grants only, a notice (a same-host peer's puts) names granted
  // blocks only, as a rendezvous run must land in them.
  if (rd.ok && opts_.grants_only)
    for (const auto& blk : batch.blocks)
      if (!is_granted(p, blk.dst, blk.dst_offset, blk.size))
        return refuse_peer(p, rejection::not_granted,
                           "a batch notice for [" + std::to_string(blk.dst_offset) + ", +"
                             + std::to_string(blk.size) + ") of region "
                             + std::to_string(blk.dst) + " outside its grants");
  if (rd.ok && p.state == peer_state::connected)
    if (auto* h = handler_.load())
      h->on_blocks_arrived(p.id, batch);
}

} // namespace tessera::transport::detail
