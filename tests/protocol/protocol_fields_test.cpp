// Every field of the protocol's shared structs crosses the wire. Each test
// names a struct's fields in a structured binding, which stops compiling
// the day a field is added (so a new field cannot be dropped silently:
// whoever adds it must set it here, and the round trip then fails until
// the codec carries it), sets every field to a value other than its
// default, encodes, decodes, and compares field by field.
//
// Links only the wire library: the protocol needs no engine code.

#include <gtest/gtest.h>

#include <caf/atom.hpp>
#include <caf/make_message.hpp>

#include "common/error.hpp"
#include "protocol/engine_errc.hpp"
#include "transport/wire/codec.hpp"

namespace tessera::protocol {
namespace {

namespace wire = transport::wire;

template <class T>
T round_trip(const T& m) {
  auto frame = wire::encode(wire::wire_message{m});
  EXPECT_TRUE(frame) << error_text(frame.error());
  if (!frame)
    return m;
  auto back = wire::decode(*frame);
  EXPECT_TRUE(back) << error_text(back.error());
  if (!back)
    return m;
  return std::get<T>(*back);
}

// Sets every field of `p`; `variant` flips the fields that exclude each
// other (ignore_eos against structured output).
void fill(sampling_params& p, int variant) {
  auto& [temperature, top_k, top_p, min_p, repetition_penalty, frequency_penalty,
         presence_penalty, seed, max_tokens, min_tokens, stop_token_ids, stop, ignore_eos,
         logprobs, speculative, structured_output] = p;
  temperature = 0.25f;
  top_k = 7;
  top_p = 0.75f;
  min_p = 0.125f;
  repetition_penalty = 1.5f;
  frequency_penalty = 0.5f;
  presence_penalty = -0.25f;
  seed = 0xdead'beef'0000'0001ull;
  max_tokens = 99;
  min_tokens = 3;
  stop_token_ids = {11, 13};
  stop = {"END", "\n\n"};
  logprobs = 4;
  auto& [method, num_tokens] = speculative.emplace();
  method = speculative_params::method_kind::ngram;
  num_tokens = 3;
  if (variant == 0) {
    ignore_eos = true;
  } else {
    auto& [kind, schema] = structured_output;
    kind = structured_output_params::kind_type::json_schema;
    schema = R"({"type":"object","properties":{"a":{"type":"integer"}}})";
  }
}

void expect_same(const sampling_params& a, const sampling_params& b) {
  const auto& [t1, k1, p1, m1, r1, f1, pr1, s1, mx1, mn1, ids1, st1, eos1, lp1, sp1, so1] = a;
  const auto& [t2, k2, p2, m2, r2, f2, pr2, s2, mx2, mn2, ids2, st2, eos2, lp2, sp2, so2] = b;
  EXPECT_EQ(t1, t2);
  EXPECT_EQ(k1, k2);
  EXPECT_EQ(p1, p2);
  EXPECT_EQ(m1, m2);
  EXPECT_EQ(r1, r2);
  EXPECT_EQ(f1, f2);
  EXPECT_EQ(pr1, pr2);
  EXPECT_EQ(s1, s2);
  EXPECT_EQ(mx1, mx2);
  EXPECT_EQ(mn1, mn2);
  EXPECT_EQ(ids1, ids2);
  EXPECT_EQ(st1, st2);
  EXPECT_EQ(eos1, eos2);
  EXPECT_EQ(lp1, lp2);
  EXPECT_EQ(sp1, sp2);
  EXPECT_EQ(so1, so2);
}

// A hand-off with every field of the request, the hand-off and its KV
// export set. variant 0: a disaggregated prefill (KV export, decode_at,
// keep_kv, continues_elsewhere); variant 1: a migrated request
// (resume_output, which excludes the others).
wire::request_handoff full_handoff(int variant) {
  wire::request_handoff m;
  auto& [request, kv, reply_to, decode_at, kv_source, kv_source_blocks, resume_output] = m;
  auto& [id, prompt, params, priority, cache_salt, keep_kv, continues_elsewhere] = request;
  id = 0x0123'4567'89ab'cdefull;
  for (int32_t i = 0; i < 48; ++i)
    prompt.push_back(100 + i);
  fill(params, variant);
  priority = -5;
  cache_salt = "tenant-b";
  reply_to = {"frontend-node", "frontend"};
  kv_source = {"store-node", "kvstore"};
  kv_source_blocks = 2;
  if (variant == 1) {
    resume_output = {7, 8, 9};
    return m;
  }
  keep_kv = true;
  continues_elsewhere = true;
  decode_at = {"decode-node", "decode-0"};
  auto& [fingerprint, layout, tokens, prompt_len, num_computed, seed, block_hashes] = kv.emplace();
  fingerprint = 0xfeed'f00d'0000'0002ull;
  auto& [block_tokens, num_layers, num_kv_heads, head_dim, kv_dtype] = layout;
  block_tokens = 16;
  num_layers = 3;
  num_kv_heads = 2;
  head_dim = 64;
  kv_dtype = dtype::i8;
  tokens = prompt;
  tokens.push_back(5);
  prompt_len = 48;
  num_computed = 48;
  seed = 77;
  for (uint64_t i = 1; i <= 3; ++i) {
    auto& [hi, lo] = block_hashes.emplace_back();
    hi = i * 0x1111'1111'1111'1111ull;
    lo = ~i;
  }
  return m;
}

TEST(ProtocolFieldsTest, EveryFieldOfARequestCrossesTheWire) {
  for (int variant : {0, 1}) {
    SCOPED_TRACE("variant " + std::to_string(variant));
    const auto sent = full_handoff(variant);
    const auto got = round_trip(sent);
    const auto& [req1, kv1, reply1, decode1, source1, blocks1, resume1] = sent;
    const auto& [req2, kv2, reply2, decode2, source2, blocks2, resume2] = got;
    const auto& [id1, prompt1, params1, prio1, salt1, keep1, cont1] = req1;
    const auto& [id2, prompt2, params2, prio2, salt2, keep2, cont2] = req2;
    EXPECT_EQ(id1, id2);
    EXPECT_EQ(prompt1, prompt2);
    expect_same(params1, params2);
    EXPECT_EQ(prio1, prio2);
    EXPECT_EQ(salt1, salt2);
    EXPECT_EQ(keep1, keep2);
    EXPECT_EQ(cont1, cont2);
    for (const auto* a : {&reply1, &decode1, &source1}) {
      const auto* b = a == &reply1 ? &reply2 : a == &decode1 ? &decode2 : &source2;
      const auto& [node1, actor1] = *a;
      const auto& [node2, actor2] = *b;
      EXPECT_EQ(node1, node2);
      EXPECT_EQ(actor1, actor2);
    }
    EXPECT_EQ(blocks1, blocks2);
    EXPECT_EQ(resume1, resume2);
    ASSERT_EQ(kv1.has_value(), kv2.has_value());
    if (!kv1)
      continue;
    const auto& [fp1, layout1, tokens1, plen1, ncomp1, seed1, hashes1] = *kv1;
    const auto& [fp2, layout2, tokens2, plen2, ncomp2, seed2, hashes2] = *kv2;
    EXPECT_EQ(fp1, fp2);
    EXPECT_EQ(layout1, layout2);
    EXPECT_EQ(tokens1, tokens2);
    EXPECT_EQ(plen1, plen2);
    EXPECT_EQ(ncomp1, ncomp2);
    EXPECT_EQ(seed1, seed2);
    EXPECT_EQ(hashes1, hashes2);
  }
}

TEST(ProtocolFieldsTest, EveryFieldOfATokenChunkCrossesTheWire) {
  token_chunk sent;
  auto& [id, tokens, logprobs, text, finish, stop_reason, stop_token, prompt_tokens,
         cached_prompt_tokens, output_tokens, error] = sent;
  id = 42;
  tokens = {5, 6};
  for (int32_t t : tokens) {
    auto& [token, logprob, top] = logprobs.emplace_back();
    token = t;
    logprob = -0.5f;
    auto& [alt, alt_logprob] = top.emplace_back();
    alt = t + 1;
    alt_logprob = -1.5f;
  }
  text = "h\xc3\xa9llo";
  finish = finish_reason::abort;
  stop_reason = "";
  stop_token = -1;
  prompt_tokens = 30;
  cached_prompt_tokens = 16;
  output_tokens = 12;
  error = make_engine_error(engine_errc::bad_logits, "request 42: logits hold NaN");
  const auto got = round_trip(sent);
  const auto& [id2, tokens2, logprobs2, text2, finish2, stop_reason2, stop_token2, prompt_tokens2,
               cached_prompt_tokens2, output_tokens2, error2] = got;
  EXPECT_EQ(id, id2);
  EXPECT_EQ(tokens, tokens2);
  ASSERT_EQ(logprobs.size(), logprobs2.size());
  for (size_t i = 0; i < logprobs.size(); ++i) {
    const auto& [t1, l1, top1] = logprobs[i];
    const auto& [t2, l2, top2] = logprobs2[i];
    EXPECT_EQ(t1, t2);
    EXPECT_EQ(l1, l2);
    ASSERT_EQ(top1.size(), top2.size());
    const auto& [a1, al1] = top1[0];
    const auto& [a2, al2] = top2[0];
    EXPECT_EQ(a1, a2);
    EXPECT_EQ(al1, al2);
  }
  EXPECT_EQ(text, text2);
  EXPECT_EQ(finish, finish2);
  EXPECT_EQ(stop_reason, stop_reason2);
  EXPECT_EQ(stop_token, stop_token2);
  EXPECT_EQ(prompt_tokens, prompt_tokens2);
  EXPECT_EQ(cached_prompt_tokens, cached_prompt_tokens2);
  EXPECT_EQ(output_tokens, output_tokens2);
  // The receiver's error compares equal to the engine's code.
  EXPECT_EQ(error2, engine_errc::bad_logits);
  EXPECT_EQ(error_message(error2), "request 42: logits hold NaN");
}

TEST(ProtocolFieldsTest, AChunkThatDidNotAbortCarriesNoError) {
  token_chunk m;
  m.id = 1;
  m.tokens = {3};
  m.finish = finish_reason::length;
  m.error = make_engine_error(engine_errc::bad_logits, "stray");
  auto frame = wire::encode(wire::wire_message{m});
  ASSERT_FALSE(frame);
  EXPECT_NE(error_message(frame.error()).find("error is set on a chunk whose finish_reason is not abort"),
            std::string::npos)
    << error_message(frame.error());
}

TEST(ProtocolFieldsTest, AChunkErrorWithAnOverlongCategoryIsRefused) {
  token_chunk m;
  m.id = 1;
  m.finish = finish_reason::abort;
  m.error = caf::error(uint8_t{1}, caf::atom_from_string("abcdefghij"), caf::make_message("x"));
  EXPECT_TRUE(wire::encode(wire::wire_message{m}));
  m.error = {};
  wire::wire_error long_category{"abcdefghijk", 1, "x"};
  m.error = wire::from_wire_error(long_category);
  EXPECT_FALSE(wire::encode(wire::wire_message{m}));
}

} // namespace
} // namespace tessera::protocol
