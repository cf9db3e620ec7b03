#include "tests/support/served_output.hpp"

#include <gtest/gtest.h>

#include "tests/support/test_model.hpp"

namespace tessera::test {

void PrintTo(const served_output& s, std::ostream* os) {
  *os << "{text \"" << s.text << "\", " << s.logprobs.size() << " logprobs [";
  for (auto lp : s.logprobs)
    *os << lp << " ";
  *os << "], finish " << s.finish << "}";
}

namespace {

void add_choice(served_output& s, const nlohmann::json& c) {
  s.text += c["text"].get<std::string>();
  if (c["logprobs"].is_object())
    for (const auto& lp : c["logprobs"]["token_logprobs"])
      s.logprobs.push_back(static_cast<float>(lp.get<double>()));
  if (!c["finish_reason"].is_null())
    s.finish = c["finish_reason"];
}

} // namespace

served_output from_completion(const nlohmann::json& response) {
  served_output s;
  add_choice(s, response["choices"][0]);
  return s;
}

served_output from_completion_stream(const std::string& body, bool& ended) {
  served_output s;
  ended = false;
  size_t pos = 0;
  while ((pos = body.find("data: ", pos)) != std::string::npos) {
    auto end = body.find("\n\n", pos);
    auto data = body.substr(pos + 6, end - pos - 6);
    pos = end;
    if (data == "[DONE]") {
      ended = true;
      break;
    }
    auto j = nlohmann::json::parse(data);
    if (!j["choices"].empty())
      add_choice(s, j["choices"][0]);
  }
  return s;
}

served_output run_alone(const std::string& shape, const std::vector<int32_t>& prompt,
                        int max_tokens, float temperature, uint64_t seed) {
  test_engine_options o;
  o.with_tokenizer = true;
  o.backend.threads = 1;
  auto eng = make_test_engine(shape, o);
  engine::request r;
  r.id = 1;
  r.prompt = prompt;
  r.params.max_tokens = max_tokens;
  r.params.temperature = temperature;
  r.params.seed = seed;
  r.params.ignore_eos = true;
  r.params.logprobs = 0;
  EXPECT_FALSE(eng->add_request(r));
  served_output s;
  while (eng->has_unfinished())
    for (const auto& out : eng->step()) {
      s.text += out.text;
      for (const auto& lp : out.logprobs)
        s.logprobs.push_back(lp.logprob);
      if (out.finish != engine::finish_reason::none)
        s.finish = std::string{engine::to_string(out.finish)};
    }
  return s;
}

} // namespace tessera::test
