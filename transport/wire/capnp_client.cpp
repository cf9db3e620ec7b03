#include "transport/wire/capnp_client.hpp"

#include <string>

#include "common/error.hpp"
#include "transport/schema/client.capnp.h"
#include "transport/wire/capnp_fields.hpp"
#include "transport/transport_errc.hpp"

namespace tessera::transport::wire {

namespace s = tessera::transport::schema;
using namespace fields;

namespace {

client_submit get(s::ClientSubmit::Reader r, const wire_limits& lim) {
  client_submit m;
  m.request_id = r.getRequestId();
  m.client = get_text("client", r.getClient(), lim.max_name_bytes);
  m.model = get_text("model", r.getModel(), lim.max_name_bytes);
  const auto kind = r.getKind();
  if (kind > static_cast<uint8_t>(protocol::prompt_kind::chat))
    refuse("kind " + std::to_string(kind) + " is not token_ids (0), text (1) or chat (2)");
  m.kind = static_cast<protocol::prompt_kind>(kind);
  m.prompt_ids = get_list<int32_t>("prompt_ids", r.getPromptIds(), lim.max_tokens, "tokens");
  m.prompt_text = get_text("prompt_text", r.getPromptText(), protocol::max_client_prompt_bytes);
  auto msgs = r.getMessages();
  bound("messages", msgs.size(), protocol::max_client_messages, "entries");
  size_t total = 0;
  for (unsigned i = 0; i < msgs.size(); ++i) {
    const auto at = "messages[" + std::to_string(i) + "]";
    protocol::chat_message c;
    c.role = get_text(at + ".role", msgs[i].getRole(), protocol::max_client_role_bytes);
    c.content = get_text(at + ".content", msgs[i].getContent(), protocol::max_client_prompt_bytes);
    total += c.content.size();
    bound("messages' contents together", total, protocol::max_client_prompt_bytes, "bytes");
    m.messages.push_back(std::move(c));
  }
  auto params = detail::get_sampling_params(r.getParams());
  if (!params)
    refuse(error_message(params.error()));
  m.params = std::move(*params);
  m.priority = r.getPriority();
  m.api_key = get_text("api_key", r.getApiKey(), lim.max_name_bytes);
  m.detokenize = r.getDetokenize();
  return m;
}

client_accepted get(s::ClientAccepted::Reader r, const wire_limits& lim) {
  client_accepted m;
  m.request_id = r.getRequestId();
  m.prompt_token_ids = get_list<int32_t>("prompt_token_ids", r.getPromptTokenIds(), lim.max_tokens, "tokens");
  m.model = get_text("model", r.getModel(), lim.max_name_bytes);
  return m;
}

client_cancel get(s::ClientCancel::Reader r, const wire_limits& lim) {
  return {r.getRequestId(), get_text("client", r.getClient(), lim.max_name_bytes)};
}

cluster_info get(s::ClusterInfo::Reader r, const wire_limits& lim) {
  cluster_info m;
  auto models = r.getModels();
  bound("models", models.size(), protocol::max_client_models, "entries");
  for (unsigned i = 0; i < models.size(); ++i)
    m.models.push_back(get_text("models[" + std::to_string(i) + "]", models[i], lim.max_name_bytes));
  m.ready = r.getReady();
  m.healthy_workers = r.getHealthyWorkers();
  m.workers = r.getWorkers();
  m.max_model_len = r.getMaxModelLen();
  m.draining = r.getDraining();
  return m;
}

client_failed get(s::ClientFailed::Reader r, const wire_limits& lim) {
  client_failed m;
  m.request_id = r.getRequestId();
  const auto code = r.getCode();
  if (code == 0 || code > protocol::max_client_errc)
    refuse("code " + std::to_string(code) + " is not a client_errc (1.." +
           std::to_string(protocol::max_client_errc) + ")");
  m.code = static_cast<protocol::client_errc>(code);
  m.http_status = r.getHttpStatus();
  m.type = get_text("type", r.getType(), lim.max_name_bytes);
  m.error_code = get_text("error_code", r.getErrorCode(), lim.max_name_bytes);
  m.param = get_text("param", r.getParam(), lim.max_name_bytes);
  m.message = get_text("message", r.getMessage(), lim.max_text_bytes);
  return m;
}

} // namespace

void put(capnp::MessageBuilder& mb, const client_submit& m) {
  auto b = mb.initRoot<s::ClientSubmit>();
  b.setRequestId(m.request_id);
  b.setClient(text(m.client));
  b.setModel(text(m.model));
  b.setKind(static_cast<uint8_t>(m.kind));
  put_ints(b.initPromptIds(static_cast<unsigned>(m.prompt_ids.size())), m.prompt_ids);
  b.setPromptText(text(m.prompt_text));
  auto msgs = b.initMessages(static_cast<unsigned>(m.messages.size()));
  for (unsigned i = 0; i < m.messages.size(); ++i) {
    msgs[i].setRole(text(m.messages[i].role));
    msgs[i].setContent(text(m.messages[i].content));
  }
  detail::put_sampling_params(b.initParams(), m.params);
  b.setPriority(m.priority);
  b.setApiKey(text(m.api_key));
  b.setDetokenize(m.detokenize);
}

void put(capnp::MessageBuilder& mb, const client_accepted& m) {
  auto b = mb.initRoot<s::ClientAccepted>();
  b.setRequestId(m.request_id);
  put_ints(b.initPromptTokenIds(static_cast<unsigned>(m.prompt_token_ids.size())), m.prompt_token_ids);
  b.setModel(text(m.model));
}

void put(capnp::MessageBuilder& mb, const client_cancel& m) {
  auto b = mb.initRoot<s::ClientCancel>();
  b.setRequestId(m.request_id);
  b.setClient(text(m.client));
}

void put(capnp::MessageBuilder& mb, const cluster_info& m) {
  auto b = mb.initRoot<s::ClusterInfo>();
  auto models = b.initModels(static_cast<unsigned>(m.models.size()));
  for (unsigned i = 0; i < m.models.size(); ++i)
    models.set(i, text(m.models[i]));
  b.setReady(m.ready);
  b.setHealthyWorkers(m.healthy_workers);
  b.setWorkers(m.workers);
  b.setMaxModelLen(m.max_model_len);
  b.setDraining(m.draining);
}

void put(capnp::MessageBuilder& mb, const client_failed& m) {
  auto b = mb.initRoot<s::ClientFailed>();
  b.setRequestId(m.request_id);
  b.setCode(static_cast<uint8_t>(m.code));
  b.setHttpStatus(m.http_status);
  b.setType(text(m.type));
  b.setErrorCode(text(m.error_code));
  b.setParam(text(m.param));
  b.setMessage(text(m.message));
}

bool is_client_message(message_type t) {
  return t >= message_type::client_submit && t <= message_type::client_failed;
}

caf::expected<wire_message> read_client(message_type t, capnp::MessageReader& reader, const wire_limits& lim) {
  try {
    switch (t) {
      case message_type::client_submit: return wire_message{get(reader.getRoot<s::ClientSubmit>(), lim)};
      case message_type::client_accepted: return wire_message{get(reader.getRoot<s::ClientAccepted>(), lim)};
      case message_type::client_cancel: return wire_message{get(reader.getRoot<s::ClientCancel>(), lim)};
      case message_type::cluster_info: return wire_message{get(reader.getRoot<s::ClusterInfo>(), lim)};
      case message_type::client_failed: return wire_message{get(reader.getRoot<s::ClientFailed>(), lim)};
      default: break;
    }
  } catch (const decode_failure& f) {
    return make_transport_error(f.code, std::string(to_string(t)) + ": " + f.what);
  }
  return make_transport_error(transport_errc::unknown_type,
                              "not a client message type: " + std::to_string(static_cast<unsigned>(t)));
}

} // namespace tessera::transport::wire
