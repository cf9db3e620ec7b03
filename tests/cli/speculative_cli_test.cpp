// `tessera generate --speculative ngram:K`: the same tokens and logprobs as
// without it, greedy and seeded, and a clear error for a bad setting.
#include <string>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "tests/support/run_tessera.hpp"
#include "tests/support/temp_dir.hpp"

namespace {

using tessera::test::run_result;

class SpeculativeCliTest : public testing::Test {
protected:
  static void SetUpTestSuite() {
    dir_ = new tessera::test::temp_dir{"tessera-spec-cli"};
    auto r = tessera::test::run_tessera("model init --shape nano --seed 3 --out " + model());
    ASSERT_EQ(r.exit_code, 0) << r.out;
  }
  static void TearDownTestSuite() { delete dir_; }
  static std::string model() { return (dir_->path() / "nano").string(); }
  static tessera::test::temp_dir* dir_;
};

tessera::test::temp_dir* SpeculativeCliTest::dir_ = nullptr;

nlohmann::json generate(const std::string& model, const std::string& extra) {
  auto r = tessera::test::run_tessera("generate --model " + model +
                                      " --prompt 'the cat sat on the mat. the cat sat on the mat. the cat'"
                                      " --max-tokens 48 --ignore-eos --json " + extra);
  EXPECT_EQ(r.exit_code, 0) << r.out;
  return nlohmann::json::parse(r.out.substr(r.out.find('{')));
}

TEST_F(SpeculativeCliTest, SameTokensAndLogprobsWithAndWithout) {
  for (const std::string sampling : {"--temperature 0", "--temperature 0.9 --seed 11"}) {
    auto plain = generate(model(), sampling);
    auto spec = generate(model(), sampling + " --speculative ngram:4");
    EXPECT_EQ(spec["token_ids"], plain["token_ids"]) << sampling;
    EXPECT_EQ(spec["logprobs"], plain["logprobs"]) << sampling;
    EXPECT_EQ(spec["text"], plain["text"]) << sampling;
    EXPECT_EQ(plain["token_ids"].size(), 48u);
  }
}

TEST_F(SpeculativeCliTest, RefusesBadSettingsClearly) {
  for (const std::string bad : {"ngram:0", "ngram:17", "ngram", "ngram:4x", "medusa:4", ""}) {
    auto r = tessera::test::run_tessera("generate --model " + model() + " --max-tokens 2 --speculative '" + bad + "'");
    EXPECT_NE(r.exit_code, 0) << bad;
    EXPECT_NE(r.out.find("--speculative must be ngram:K or draft:K"), std::string::npos) << r.out;
  }
  auto r = tessera::test::run_tessera("generate --model " + model() + " --max-tokens 2 --speculative draft:4");
  EXPECT_NE(r.exit_code, 0);
  EXPECT_NE(r.out.find("needs a draft model"), std::string::npos) << r.out;
}

} // namespace
