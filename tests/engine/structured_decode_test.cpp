// Constrained decoding through the engine (engine/structured_output.hpp):
// on a random-weight model, every output under each schema of the grammar
// corpus parses and validates (our validator, and python3-jsonschema where
// installed), greedy and seeded-sampled, batched; speculative decoding,
// preemption, prefix caching and a KV hand-off give the same output as a
// plain run; EOS comes exactly when the document can end; bad requests are
// refused naming why.
#include <fstream>
#include <map>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "common/error.hpp"
#include "engine/engine_errc.hpp"
#include "tests/engine/grammar_corpus.hpp"
#include "tests/engine/grammar_test_support.hpp"
#include "tests/support/engine_runs.hpp"
#include "tests/support/temp_dir.hpp"
#include "tests/support/test_model.hpp"

namespace {

using namespace tessera;
using namespace tessera::engine;
using nlohmann::json;
using test::drain;
using test::random_prompt;
using test::run_all;
using test::run_one;
using test::grammar_support::schema_corpus;
using test::grammar_support::validate;

test::test_engine_options opts(int32_t blocks = 512, speculative_params spec = {}) {
  test::test_engine_options o;
  o.backend.num_blocks = blocks;
  o.engine.speculative = spec;
  o.with_tokenizer = true;
  return o;
}

request schema_request(uint64_t id, const std::string& schema, float temperature,
                       int32_t max_tokens = 160) {
  request r;
  r.id = id;
  r.prompt = random_prompt(12 + static_cast<int>(id % 7), 500 + id);
  r.params.temperature = temperature;
  r.params.seed = 9000 + id;
  r.params.max_tokens = max_tokens;
  r.params.logprobs = 0;
  r.params.structured_output.kind = structured_output_params::kind_type::json_schema;
  r.params.structured_output.schema = schema;
  return r;
}

// Parses and validates `text` against `schema`; "" when valid, else why.
std::string check_document(const std::string& schema, const std::string& text) {
  json value = json::parse(text, nullptr, false);
  if (value.is_discarded())
    return "not JSON: " + text;
  json root = json::parse(schema);
  std::string why;
  if (!validate(root, root, value, why))
    return why + "\ndocument: " + text;
  return {};
}

struct corpus_run {
  std::vector<std::pair<size_t, std::string>> docs; // schema index, output text
  std::map<uint64_t, test::run_result> results;
  std::vector<request> requests;
};

// Every corpus schema, greedy and seeded-sampled, all in one batch.
const corpus_run& corpus_outputs() {
  static corpus_run run = [] {
    corpus_run out;
    const auto& corpus = schema_corpus();
    for (size_t s = 0; s < corpus.size(); ++s)
      for (float t : {0.0f, 1.0f})
        out.requests.push_back(schema_request(out.requests.size(), corpus[s], t));
    auto eng = test::make_test_engine("nano", opts());
    out.results = run_all(*eng, out.requests);
    for (const auto& r : out.requests)
      out.docs.emplace_back(r.id / 2, out.results[r.id].text);
    const auto st = eng->stats();
    EXPECT_EQ(st.free_blocks, st.num_blocks);
    return out;
  }();
  return run;
}

TEST(StructuredDecodeTest, EveryCorpusOutputParsesAndValidates) {
  const auto& run = corpus_outputs();
  ASSERT_GE(schema_corpus().size(), 50u);
  size_t ended_by_eos = 0, nontrivial = 0;
  for (const auto& r : run.requests) {
    const auto& got = run.results.at(r.id);
    const auto& schema = r.params.structured_output.schema;
    EXPECT_NE(got.finish, finish_reason::abort) << schema;
    EXPECT_LE(got.tokens.size(), static_cast<size_t>(r.params.max_tokens));
    EXPECT_EQ(check_document(schema, got.text), "") << "schema: " << schema << " temperature "
                                                    << r.params.temperature;
    ended_by_eos += got.finish == finish_reason::stop;
    nontrivial += got.text.size() > 8;
  }
  // Most documents end by EOS (not all: random weights may wander until the
  // budget closes them), and they are not all minimal.
  EXPECT_GT(ended_by_eos, run.requests.size() / 2);
  EXPECT_GT(nontrivial, run.requests.size() / 3);
}

TEST(StructuredDecodeTest, PythonJsonschemaAgreesEveryOutputIsValid) {
  if (std::system("python3 -c 'import jsonschema' >/dev/null 2>&1") != 0)
    GTEST_SKIP() << "python3-jsonschema is not installed";
  const auto& run = corpus_outputs();
  test::temp_dir dir("tessera-structured-py");
  auto input = dir.path() / "docs.jsonl";
  {
    std::ofstream out(input);
    for (const auto& [s, text] : run.docs)
      out << json{{"schema", json::parse(schema_corpus()[s])}, {"doc", text}}.dump() << "\n";
  }
  auto script = dir.path() / "check.py";
  {
    std::ofstream out(script);
    out << "import json, sys, jsonschema\n"
           "bad = 0\n"
           "n = 0\n"
           "for line in open(sys.argv[1]):\n"
           "    n += 1\n"
           "    case = json.loads(line)\n"
           "    try:\n"
           "        jsonschema.validate(json.loads(case['doc']), case['schema'])\n"
           "    except Exception as e:\n"
           "        bad += 1\n"
           "        if bad <= 5: print('INVALID', case['doc'][:300], type(e).__name__, str(e)[:300])\n"
           "print('checked', n, 'invalid', bad)\n"
           "sys.exit(1 if bad else 0)\n";
  }
  auto log = dir.path() / "log.txt";
  std::string cmd = "python3 " + script.string() + " " + input.string() + " > " + log.string() + " 2>&1";
  int rc = std::system(cmd.c_str());
  std::ifstream in(log);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_EQ(rc, 0) << text;
  EXPECT_NE(text.find("checked " + std::to_string(run.docs.size()) + " invalid 0"), std::string::npos)
    << text;
}

TEST(StructuredDecodeTest, JsonObjectModeGivesAnObject) {
  auto eng = test::make_test_engine("nano", opts());
  std::vector<request> reqs;
  for (uint64_t i = 0; i < 6; ++i) {
    auto r = schema_request(i, "", i % 2 ? 1.0f : 0.0f, 96);
    r.params.structured_output = {structured_output_params::kind_type::json_object, ""};
    reqs.push_back(r);
  }
  auto got = run_all(*eng, reqs);
  for (const auto& r : reqs) {
    json v = json::parse(got[r.id].text, nullptr, false);
    ASSERT_FALSE(v.is_discarded()) << got[r.id].text;
    EXPECT_TRUE(v.is_object()) << got[r.id].text;
  }
}

TEST(StructuredDecodeTest, TightBudgetsStillCloseTheDocument) {
  // max_tokens just above what the shortest document needs: the mask
  // keeps every step's completion within the budget.
  const std::string schema =
    R"({"type":"object","properties":{"name":{"type":"string"},"tags":{"type":"array","items":{"type":"string"}}},"required":["name","tags"],"additionalProperties":false})";
  // {"name":"","tags":[]} is 21 bytes.
  auto eng = test::make_test_engine("nano", opts());
  std::vector<request> reqs;
  for (uint64_t i = 0; i < 12; ++i)
    reqs.push_back(schema_request(i, schema, i % 3 == 0 ? 0.0f : 1.5f, 23 + static_cast<int32_t>(i)));
  auto got = run_all(*eng, reqs);
  for (const auto& r : reqs)
    EXPECT_EQ(check_document(schema, got[r.id].text), "") << "max_tokens " << r.params.max_tokens;
}

TEST(StructuredDecodeTest, EosComesWhenTheDocumentEndsWhateverMinTokens) {
  auto eng = test::make_test_engine("nano", opts());
  auto r = schema_request(1, R"({"type":"boolean"})", 0.0f, 40);
  r.params.min_tokens = 30;
  auto got = run_one(*eng, r);
  EXPECT_EQ(got.finish, finish_reason::stop);
  EXPECT_TRUE(got.text == "true" || got.text == "false") << got.text;
  EXPECT_LT(got.tokens.size(), 30u);
}

TEST(StructuredDecodeTest, SpeculativeDecodingGivesTheSameOutput) {
  // Drafts are verified against the mask: row i is sampled under the
  // grammar state after draft i, and a draft the mask forbids can never
  // equal the sampled token.
  std::vector<request> reqs;
  const auto& corpus = schema_corpus();
  for (uint64_t i = 0; i < 12; ++i)
    reqs.push_back(schema_request(i, corpus[(i * 5) % corpus.size()], i % 2 ? 0.8f : 0.0f, 96));
  auto plain = run_all(*test::make_test_engine("nano", opts()), reqs);
  auto eng = test::make_test_engine("nano", opts(512, {speculative_params::method_kind::ngram, 4}));
  auto spec = run_all(*eng, reqs);
  for (const auto& r : reqs)
    EXPECT_EQ(spec[r.id], plain[r.id]) << r.params.structured_output.schema;
  EXPECT_GT(eng->stats().draft_tokens, 0u);
}

TEST(StructuredDecodeTest, PreemptionAndPrefixCachingKeepTheMatcher) {
  // 10 blocks of 16 tokens for four requests of up to ~110 tokens: they
  // are preempted and recomputed; the matcher is the request's, not the
  // KV's, so the output is the same as with a big pool.
  std::vector<request> reqs;
  const std::string schema = schema_corpus()[38];
  for (uint64_t i = 0; i < 4; ++i) {
    auto r = schema_request(i, schema, i % 2 ? 0.9f : 0.0f, 80);
    r.prompt = random_prompt(24, 77); // one shared prompt: prefix-cache hits
    reqs.push_back(r);
  }
  auto big = run_all(*test::make_test_engine("nano", opts()), reqs);
  auto eng = test::make_test_engine("nano", opts(10));
  auto small = run_all(*eng, reqs);
  EXPECT_GT(eng->stats().preemptions, 0u);
  EXPECT_GT(eng->stats().cache.prefix_hit_tokens, 0u);
  for (const auto& r : reqs) {
    EXPECT_EQ(small[r.id], big[r.id]) << r.id;
    EXPECT_EQ(check_document(schema, small[r.id].text), "");
  }
}

TEST(StructuredDecodeTest, HandoffReplaysTheOutputIntoANewMatcher) {
  const std::string schema = schema_corpus()[42];
  for (float temperature : {0.0f, 1.0f}) {
    auto r = schema_request(3, schema, temperature, 120);
    auto whole = run_one(*test::make_test_engine("nano", opts()), r);

    // The prefill half as the worker runs it: one token, KV held, and the
    // decode worker's budget ahead (so the first token is not forced to
    // close the document).
    auto prefill = test::make_test_engine("nano", opts());
    auto first = r;
    first.params.max_tokens = 1;
    first.keep_kv = true;
    first.continues_elsewhere = true;
    auto head = run_one(*prefill, first);
    ASSERT_EQ(head.tokens.size(), 1u);
    auto kv = prefill->export_request(r.id);
    ASSERT_TRUE(kv) << error_text(kv.error());

    auto decode = test::make_test_engine("nano", opts());
    ASSERT_FALSE(decode->import_request(r, *kv));
    auto tail = drain(*decode)[r.id];
    auto joined = head;
    joined.tokens.insert(joined.tokens.end(), tail.tokens.begin(), tail.tokens.end());
    joined.logprobs.insert(joined.logprobs.end(), tail.logprobs.begin(), tail.logprobs.end());
    joined.finish = tail.finish;
    EXPECT_EQ(joined, whole) << "temperature " << temperature;
    EXPECT_EQ(check_document(schema, head.text + tail.text), "");

    // An export whose output the grammar does not allow is refused.
    auto bad = *kv;
    auto tok = test::test_tokenizer("nano");
    bad.tokens.back() = tok->token_to_id("}").value_or(125);
    auto again = test::make_test_engine("nano", opts());
    auto err = again->import_request(r, bad);
    ASSERT_TRUE(err);
    EXPECT_NE(error_message(err).find("does not follow the request's structured-output grammar"),
              std::string::npos)
      << error_message(err);
    EXPECT_EQ(again->num_unfinished(), 0u);
  }
}

TEST(StructuredDecodeTest, BadRequestsAreRefusedNamingWhy) {
  auto eng = test::make_test_engine("nano", opts());
  auto r = schema_request(1, R"({"type":"integer","minimum":3})", 0.0f);
  auto err = eng->add_request(r);
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("minimum"), std::string::npos) << error_message(err);
  EXPECT_EQ(eng->num_unfinished(), 0u);

  r = schema_request(2, R"({"type":"string"})", 0.0f);
  r.params.ignore_eos = true;
  err = eng->add_request(r);
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("ignore_eos"), std::string::npos) << error_message(err);

  r = schema_request(3, "", 0.0f);
  err = eng->add_request(r);
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("needs a schema"), std::string::npos) << error_message(err);

  r = schema_request(4, "{not json", 0.0f);
  err = eng->add_request(r);
  ASSERT_TRUE(err);

  r = schema_request(5, std::string(structured_output_params::max_schema_bytes + 1, ' '), 0.0f);
  err = eng->add_request(r);
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("at most"), std::string::npos) << error_message(err);

  auto o = opts();
  o.with_tokenizer = false;
  auto bare = test::make_test_engine("nano", o);
  err = bare->add_request(schema_request(6, R"({"type":"string"})", 0.0f));
  ASSERT_TRUE(err);
  EXPECT_NE(error_message(err).find("tokenizer"), std::string::npos) << error_message(err);
  EXPECT_EQ(bare->num_unfinished(), 0u);
}

} // namespace
