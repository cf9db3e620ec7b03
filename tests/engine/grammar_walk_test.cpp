// The strong test of the grammar engine: for every schema of the corpus,
// random walks that pick a random allowed token from the mask of a real
// vocabulary (the demo byte-level BPE tokenizer) until EOS must all end,
// and every document must parse as JSON and validate against its schema,
// by our validator and, where python3-jsonschema is installed, by it.
#include <bit>
#include <cstdio>
#include <set>
#include <fstream>
#include <random>

#include <gtest/gtest.h>

#include "engine/grammar/json_schema.hpp"
#include "tests/engine/grammar_corpus.hpp"
#include "tests/engine/grammar_test_support.hpp"

namespace {

using namespace tessera::engine::grammar;
using namespace tessera::test::grammar_support;
using nlohmann::json;

struct walk_result {
  std::string text;
  size_t steps = 0;
  bool ended = false;
  std::string failure;
};

// Free masks for `budget` steps, closing masks after; EOS taken with
// probability 1/2 when allowed. The matcher travels through
// serialize/deserialize at every step, as it will between workers.
walk_result random_walk(const std::shared_ptr<const grammar>& g, const token_trie& trie,
                        token_masker& masker, std::mt19937_64& rng, size_t budget) {
  walk_result r;
  grammar_matcher m(g);
  token_mask mask;
  std::vector<int32_t> allowed;
  for (r.steps = 0; r.steps < budget + 4000; ++r.steps) {
    std::string error;
    auto restored = grammar_matcher::deserialize(g, m.serialize(), error);
    if (!restored) {
      r.failure = "deserialize: " + error;
      return r;
    }
    m = std::move(*restored);
    mask_mode mode = r.steps < budget ? mask_mode::free : mask_mode::closing;
    masker.fill(m, mode, mask);
    if (mask.eos_allowed != m.can_end()) {
      r.failure = "eos_allowed differs from can_end";
      return r;
    }
    if (mask.eos_allowed && (mode == mask_mode::closing || rng() % 2 == 0)) {
      r.ended = true;
      return r;
    }
    allowed.clear();
    for (size_t w = 0; w < mask.bits.size(); ++w)
      for (uint64_t bits = mask.bits[w]; bits != 0; bits &= bits - 1)
        allowed.push_back(static_cast<int32_t>(w * 64 + static_cast<size_t>(std::countr_zero(bits))));
    std::erase_if(allowed, [&](int32_t id) { return trie.is_eos(id); });
    if (allowed.empty() && mask.eos_allowed) {
      r.ended = true;
      return r;
    }
    if (allowed.empty()) {
      r.failure = "no token allowed and the document cannot end, after: " + r.text;
      return r;
    }
    int32_t id = allowed[rng() % allowed.size()];
    if (!masker.accept_token(m, id)) {
      r.failure = "the matcher refused a token its mask allowed";
      return r;
    }
    r.text += trie.bytes_of(id);
  }
  r.failure = "did not end within budget + 4000 steps: " + r.text.substr(0, 200);
  return r;
}

struct walked_doc {
  size_t schema = 0;
  std::string text;
};

// Runs the walks once per process; both tests read the documents.
const std::vector<walked_doc>& corpus_walks() {
  static std::vector<walked_doc> docs = [] {
    std::vector<walked_doc> out;
    for (int32_t vocab : {32000, 512}) {
      const token_trie& trie = demo_trie(vocab);
      token_masker masker(trie);
      std::mt19937_64 rng(1234 + vocab);
      for (size_t s = 0; s < schema_corpus().size(); ++s) {
        auto compiled = compile_json_schema_text(schema_corpus()[s]);
        EXPECT_TRUE(compiled.ok()) << schema_corpus()[s] << ": " << compiled.error.text();
        if (!compiled.ok())
          continue;
        int walks = vocab == 512 ? 6 : 20;
        for (int w = 0; w < walks; ++w) {
          size_t budget = w % 4 == 0 ? 4 : w % 4 == 1 ? 16 : 64;
          auto r = random_walk(compiled.value, trie, masker, rng, budget);
          EXPECT_TRUE(r.failure.empty()) << schema_corpus()[s] << ": " << r.failure;
          EXPECT_TRUE(r.ended);
          if (r.ended)
            out.push_back({s, r.text});
        }
      }
    }
    return out;
  }();
  return docs;
}

TEST(GrammarWalkTest, EveryRandomWalkEndsInAValidDocument) {
  const auto& docs = corpus_walks();
  ASSERT_GE(docs.size(), schema_corpus().size() * 20);
  size_t distinct_nontrivial = 0;
  std::set<std::string> seen;
  for (const auto& d : docs) {
    json root = json::parse(schema_corpus()[d.schema]);
    json value = json::parse(d.text, nullptr, false);
    ASSERT_FALSE(value.is_discarded())
        << "not JSON: " << d.text << "\nschema: " << schema_corpus()[d.schema];
    std::string why;
    EXPECT_TRUE(validate(root, root, value, why))
        << why << "\ndocument: " << d.text << "\nschema: " << schema_corpus()[d.schema];
    if (seen.insert(d.text).second && d.text.size() > 8)
      ++distinct_nontrivial;
  }
  // The walks explore: most documents differ and are not minimal.
  EXPECT_GT(distinct_nontrivial, docs.size() / 3);
}

TEST(GrammarWalkTest, PythonJsonschemaAgreesEveryDocumentIsValid) {
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed";
  const auto& docs = corpus_walks();
  ASSERT_FALSE(docs.empty());
  tessera::test::temp_dir dir("tessera-grammar-py");
  auto input = dir.path() / "docs.jsonl";
  {
    std::ofstream out(input);
    for (const auto& d : docs)
      out << json{{"schema", json::parse(schema_corpus()[d.schema])}, {"doc", d.text}}.dump()
          << "\n";
  }
  auto script = dir.path() / "check.py";
  {
    std::ofstream out(script);
    out << "import json, sys, jsonschema\n"
           "bad = 0\n"
           "for line in open(sys.argv[1]):\n"
           "    case = json.loads(line)\n"
           "    try:\n"
           "        jsonschema.validate(json.loads(case['doc']), case['schema'])\n"
           "    except Exception as e:\n"
           "        bad += 1\n"
           "        if bad <= 5: print('INVALID', case['doc'][:300], type(e).__name__, str(e)[:300])\n"
           "print('checked', sum(1 for _ in open(sys.argv[1])), 'invalid', bad)\n"
           "sys.exit(1 if bad else 0)\n";
  }
  auto log = dir.path() / "log.txt";
  std::string cmd = "python3 " + script.string() + " " + input.string() + " > " + log.string() +
                    " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("invalid 0"), std::string::npos) << text;
}

TEST(GrammarWalkTest, TokenMaskEqualsTheBruteForceMask) {
  // At every step of a few walks, the trie walk's mask must equal asking
  // the matcher about every token one by one.
  const token_trie& trie = demo_trie(32000);
  const auto& vocab_bytes = [&](int32_t id) -> const std::string& { return trie.bytes_of(id); };
  token_masker masker(trie, 0);
  token_masker cached(trie, 64); // the state and per-node caches
  std::mt19937_64 rng(7);
  for (size_t s : {4u, 9u, 18u, 30u, 37u, 41u, 46u, 49u, 51u}) {
    auto compiled = compile_json_schema_text(schema_corpus()[s]);
    ASSERT_TRUE(compiled.ok());
    grammar_matcher m(compiled.value);
    token_mask mask;
    token_mask closing;
    for (int step = 0; step < 12; ++step) {
      masker.fill(m, mask_mode::free, mask);
      std::vector<int32_t> allowed;
      for (int32_t id = 0; id < trie.vocab_size(); ++id) {
        bool expect = false;
        if (trie.is_eos(id)) {
          expect = m.can_end();
        } else if (!vocab_bytes(id).empty()) {
          grammar_matcher copy = m;
          expect = copy.accept_bytes(vocab_bytes(id));
        }
        ASSERT_EQ(mask.allowed(id), expect) << "schema " << s << " step " << step << " id " << id;
        if (expect && !trie.is_eos(id))
          allowed.push_back(id);
      }
      token_mask from_cache;
      cached.fill(m, mask_mode::free, from_cache);
      ASSERT_EQ(from_cache.bits, mask.bits) << "schema " << s << " step " << step;
      masker.fill(m, mask_mode::closing, closing);
      ASSERT_GT(closing.count(), 0u);
      for (size_t w = 0; w < closing.bits.size(); ++w)
        ASSERT_EQ(closing.bits[w] & ~mask.bits[w], 0u) << "closing mask outside the free mask";
      if (allowed.empty())
        break;
      ASSERT_TRUE(masker.accept_token(m, allowed[rng() % allowed.size()]));
    }
  }
}

TEST(GrammarWalkTest, CachedMasksEqualFreshOnes) {
  const token_trie& trie = demo_trie(512);
  token_masker cached(trie, 64);
  token_masker fresh(trie, 0);
  auto compiled = compile_json_schema_text(schema_corpus()[37]);
  ASSERT_TRUE(compiled.ok());
  std::mt19937_64 rng(3);
  grammar_matcher m(compiled.value);
  token_mask a;
  token_mask b;
  for (int step = 0; step < 200 && !m.finished(); ++step) {
    cached.fill(m, mask_mode::free, a);
    fresh.fill(m, mask_mode::free, b);
    ASSERT_EQ(a.bits, b.bits);
    ASSERT_EQ(a.eos_allowed, b.eos_allowed);
    std::vector<int32_t> ids;
    for (int32_t id = 0; id < trie.vocab_size(); ++id)
      if (a.allowed(id) && !trie.is_eos(id))
        ids.push_back(id);
    if (ids.empty())
      break;
    ASSERT_TRUE(cached.accept_token(m, ids[rng() % ids.size()]));
  }
  EXPECT_GT(cached.cache_hits(), 0u);
}

} // namespace
