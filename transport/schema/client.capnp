# The native client SDK's messages (protocol/client.hpp): a client program
# submitting, cancelling and asking about requests at the frontend. Tokens
# come back as tokens.capnp's TokenChunk.
@0xdfd60e8b431aa9dd;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::transport::schema");

using Request = import "request.capnp";

struct ChatMessage {
  role @0 :Text;
  content @1 :Text;
}

# protocol::client_submit. kind: 0 token ids, 1 text, 2 chat. Logprobs are
# asked in params (hasLogprobs, logprobs: 0..20 alternatives) and come back
# in TokenChunk.logprobs, both bounded and checked as for the workers.
struct ClientSubmit {
  requestId @0 :UInt64;
  client @1 :Text;
  model @2 :Text;
  kind @3 :UInt8;
  promptIds @4 :List(Int32);
  promptText @5 :Text;
  messages @6 :List(ChatMessage);
  params @7 :Request.SamplingParams;
  priority @8 :Int32;
  apiKey @9 :Text;
  detokenize @10 :Bool = true;
}

struct ClientAccepted {
  requestId @0 :UInt64;
  promptTokenIds @1 :List(Int32);
  model @2 :Text;
}

struct ClientCancel {
  requestId @0 :UInt64;
  client @1 :Text;
}

struct ClusterInfo {
  models @0 :List(Text);
  ready @1 :Bool;
  healthyWorkers @2 :Int32;
  workers @3 :Int32;
  maxModelLen @4 :Int32;
  draining @5 :Bool;
}

# protocol::client_failed. code: protocol::client_errc.
struct ClientFailed {
  requestId @0 :UInt64;
  code @1 :UInt8;
  httpStatus @2 :Int32;
  type @3 :Text;
  errorCode @4 :Text;
  param @5 :Text;
  message @6 :Text;
}
