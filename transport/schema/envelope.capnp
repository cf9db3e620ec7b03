# An actor message between two nodes' bridges: a named operation on a
# named actor, with the id a reply is matched by. The argument (or reply
# value) is a whole inner frame, decoded and validated on its own.
@0xd64cc6f6a4d3b1e2;

using Cxx = import "/capnp/c++.capnp";
$Cxx.namespace("tessera::transport::schema");

enum EnvelopeKind {
  # One-way: no reply.
  tell @0;
  # Wants exactly one response or failure with the same callId.
  request @1;
  response @2;
  failure @3;
}

struct Envelope {
  kind @0 :EnvelopeKind;
  callId @1 :UInt64;
  # The operation (tell, request): e.g. "handoff".
  operation @2 :Text;
  # An encoded frame of any type but Envelope; empty for an operation
  # without an argument or a response without a value.
  payload @3 :Data;
}
