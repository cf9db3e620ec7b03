// Small cluster TOMLs for tests of the config's top-level keys: the key's
// lines go before one of these (parse_cluster_config(lines + one_node_config)).
#pragma once

#include <string>

#include "cluster/cluster_config.hpp"

namespace tessera::test {

/// One node with every role.
inline constexpr const char* one_node_config = R"(
model = "/models/m"
[[node]]
id = "a"
address = "127.0.0.1:14000"
roles = ["frontend", "router", "prefill", "decode"]
http = "0.0.0.0:9000"
)";

/// One node that only routes.
inline constexpr const char* one_router =
  "[[node]]\nid = \"a\"\naddress = \"127.0.0.1:14000\"\nroles = [\"router\"]\n";

/// Every problem read_cluster_config finds in `text`, a line each.
inline std::string problems_of(const std::string& text) {
  std::string all;
  for (const auto& p : tessera::cluster::read_cluster_config(text, "c.toml").problems)
    all += p + "\n";
  return all;
}

} // namespace tessera::test
