// A cluster TOML's one node with every role, for tests of one top-level key:
// the key's lines go before it (parse_cluster_config(lines + one_node_config)).
#pragma once

namespace tessera::test {

inline constexpr const char* one_node_config = R"(
model = "/models/m"
[[node]]
id = "a"
address = "127.0.0.1:14000"
roles = ["frontend", "router", "prefill", "decode"]
http = "0.0.0.0:9000"
)";

} // namespace tessera::test
