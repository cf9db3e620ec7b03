// Choosing the KV data path from the transport's configuration.

#include "transport/ucx/ucx_kv_path.hpp"

#include <array>
#include <sstream>

#include "transport/transport_errc.hpp"

namespace tessera::transport {

namespace {

// UCX_TLS names under which UCX 1.13 finds a shared-memory transport that
// puts for real (cma's process_vm_writev, knem, xpmem). "sm" and "shm" are
// its aliases for every shared-memory transport.
constexpr std::array<std::string_view, 6> shm_rma_names = {"all", "sm", "shm", "cma", "knem",
                                                            "xpmem"};

bool is_shm_rma(std::string_view name) {
  for (auto n : shm_rma_names)
    if (name == n)
      return true;
  return false;
}

// Whether the UCX_TLS-style `list` lets UCX use a shared-memory RMA
// transport. A leading '^' makes the list an exclusion ("all but these").
bool allows_shm_rma(std::string_view list) {
  if (list.empty())
    return true; // UCX's default: all
  bool exclude = list.front() == '^';
  if (exclude)
    list.remove_prefix(1);
  bool named = false;
  bool excluded_all = false;
  std::istringstream in{std::string{list}};
  std::string name;
  while (std::getline(in, name, ',')) {
    if (is_shm_rma(name)) {
      named = true;
      if (name == "sm" || name == "shm" || name == "all")
        excluded_all = true;
    }
  }
  // "^tcp" leaves cma; "^sm" (or "^cma,knem,xpmem") removes what matters:
  // treat the alias as removing all of it, a single name as leaving others.
  return exclude ? !excluded_all : named;
}

} // namespace

std::string_view to_string(ucx_kv_path path) {
  switch (path) {
    case ucx_kv_path::automatic:
      return "auto";
    case ucx_kv_path::put:
      return "put";
    case ucx_kv_path::am_rndv:
      return "am_rndv";
  }
  return "?";
}

std::optional<ucx_kv_path> parse_kv_path(std::string_view text) {
  for (auto p : {ucx_kv_path::automatic, ucx_kv_path::put, ucx_kv_path::am_rndv})
    if (text == to_string(p))
      return p;
  return std::nullopt;
}

caf::expected<ucx_kv_path> resolve_kv_path(ucx_kv_path option, const std::string& tls,
                                           const char* env_tls, const char* env_override,
                                           bool peer_error_handling) {
  if (option != ucx_kv_path::automatic)
    return option;
  if (env_override != nullptr && *env_override != '\0') {
    auto p = parse_kv_path(env_override);
    if (!p || *p == ucx_kv_path::automatic)
      return make_transport_error(transport_errc::invalid_message,
                                  std::string{"ucx: TESSERA_UCX_KV_PATH='"} + env_override
                                    + "' is neither put nor am_rndv");
    return *p;
  }
  if (peer_error_handling)
    return ucx_kv_path::am_rndv;
  return allows_shared_memory(tls, env_tls) ? ucx_kv_path::put : ucx_kv_path::am_rndv;
}

bool allows_shared_memory(const std::string& tls, const char* env_tls) {
  const std::string_view list = !tls.empty() ? std::string_view{tls}
                                : env_tls   ? std::string_view{env_tls}
                                            : std::string_view{};
  return allows_shm_rma(list);
}

} // namespace tessera::transport
