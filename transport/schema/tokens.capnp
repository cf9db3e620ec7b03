# Generated tokens streamed from a worker back to the request's owner
# (engine::request_output).
@0xa52d4999b60be190;

using Cxx = import "/capnp/c++.capnp";
using Common = import "common.capnp";
$Cxx.namespace("tessera::transport::schema");

# engine::finish_reason.
enum FinishReason {
  none @0;
  stop @1;
  length @2;
  abort @3;
}

struct TopLogprob {
  token @0 :Int32;
  logprob @1 :Float32;
}

# One generated token's log-probability and the alternatives asked for.
struct TokenLogprob {
  token @0 :Int32;
  logprob @1 :Float32;
  top @2 :List(TopLogprob);
}

struct TokenChunk {
  requestId @0 :UInt64;
  tokens @1 :List(Int32);
  # Empty, or one entry per token.
  logprobs @2 :List(TokenLogprob);
  text @3 :Text;
  finishReason @4 :FinishReason;
  stopReason @5 :Text;
  promptTokens @6 :Int32;
  cachedPromptTokens @7 :Int32;
  outputTokens @8 :Int32;
  # The stop_token_ids entry that ended the request; -1 for none.
  stopToken @9 :Int32 = -1;
  # Set when the engine failed the request (finishReason is then abort):
  # why, as a caf::error's parts (engine::request_output::error). Unset
  # (no category) otherwise.
  error @10 :Common.Error;
}
