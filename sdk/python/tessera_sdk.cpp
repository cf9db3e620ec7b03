// tessera_sdk: a thin Python binding of the C++ client SDK
// (include/tessera/sdk.hpp). Python objects in, dicts out; every blocking
// wait releases the GIL and wakes every 100 ms to let Ctrl-C through, which
// cancels the request on the cluster before KeyboardInterrupt propagates.
//
//   import tessera_sdk
//   c = tessera_sdk.Client("10.0.0.7:13337", cluster_secret_file="cluster.secret")
//   print(c.complete("Once upon a time", max_tokens=32, temperature=0)["text"])
//   for chunk in c.stream("Once upon a time", max_tokens=32):
//       print(chunk["text"], end="", flush=True)

#include <chrono>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include <pybind11/pybind11.h>
#include <pybind11/stl.h>

#include <tessera/sdk.hpp>

namespace py = pybind11;
namespace sdk = tessera::sdk;
using namespace std::chrono_literals;

namespace {

/// How often a blocked call wakes up to look for Ctrl-C.
constexpr auto signal_poll = 100ms;

/// tessera_sdk.Error; created at import, lives as long as the process.
PyObject* error_class = nullptr;

py::object none_if_empty(const std::string& s) {
  return s.empty() ? py::none() : py::object(py::str(s));
}

/// Raises tessera_sdk.Error carrying `e`'s status, type, code, param and
/// message (code and param None when the HTTP API has none).
void set_python_error(const sdk::error& e) {
  py::object inst = py::reinterpret_borrow<py::object>(error_class)(e.what());
  inst.attr("status") = e.http_status();
  inst.attr("type") = e.type();
  inst.attr("code") = none_if_empty(e.error_code());
  inst.attr("param") = none_if_empty(e.param());
  inst.attr("message") = std::string{e.what()};
  inst.attr("kind") = std::string{tessera::protocol::to_string(e.code())};
  PyErr_SetObject(error_class, inst.ptr());
}

[[noreturn]] void raise_sdk(sdk::client_errc code, int status, const std::string& message,
                            const std::string& type, const std::string& param = {}) {
  throw sdk::error(code, status, message, type, "", param);
}

[[noreturn]] void bad_argument(const std::string& message, const std::string& param) {
  raise_sdk(sdk::client_errc::bad_request, 400, message, "invalid_request_error", param);
}

/// `s` as a str; bytes that are not UTF-8 become U+FFFD (as the HTTP API's
/// JSON writes them), never a UnicodeDecodeError.
py::str text_of(const std::string& s) {
  PyObject* o = PyUnicode_DecodeUTF8(s.data(), static_cast<Py_ssize_t>(s.size()), "replace");
  if (o == nullptr)
    throw py::error_already_set();
  return py::reinterpret_steal<py::str>(o);
}

py::object logprobs_of(const std::vector<sdk::sampled_token>& lps) {
  if (lps.empty())
    return py::none();
  py::list out;
  for (const auto& t : lps) {
    py::list top;
    for (const auto& a : t.top_logprobs) {
      py::dict alt;
      alt["token"] = a.token;
      alt["logprob"] = a.logprob;
      top.append(std::move(alt));
    }
    py::dict e;
    e["token"] = t.token;
    e["logprob"] = t.logprob;
    e["top_logprobs"] = std::move(top);
    out.append(std::move(e));
  }
  return out;
}

py::dict chunk_dict(const sdk::chunk& c) {
  py::dict d;
  d["tokens"] = c.tokens;
  d["text"] = text_of(c.text);
  d["finish_reason"] = none_if_empty(c.finish_reason);
  d["stop_reason"] = none_if_empty(c.stop_reason);
  d["prompt_tokens"] = c.prompt_tokens;
  d["cached_prompt_tokens"] = c.cached_prompt_tokens;
  d["output_tokens"] = c.output_tokens;
  d["logprobs"] = logprobs_of(c.logprobs);
  return d;
}

py::dict result_dict(const sdk::result& r) {
  py::dict d;
  d["model"] = r.model;
  d["prompt_token_ids"] = r.prompt_token_ids;
  d["token_ids"] = r.token_ids;
  d["text"] = text_of(r.text);
  d["finish_reason"] = none_if_empty(r.finish_reason);
  d["cached_prompt_tokens"] = r.cached_prompt_tokens;
  d["logprobs"] = logprobs_of(r.logprobs);
  return d;
}

int32_t token_id(const py::handle& h, const std::string& at) {
  if (!py::isinstance<py::int_>(h) || py::isinstance<py::bool_>(h))
    bad_argument(at + " must be an int (a token id)", at);
  const auto v = h.cast<long long>(); // OverflowError past 64 bits
  if (v < 0 || v > std::numeric_limits<int32_t>::max())
    bad_argument(at + " must be a token id in [0, 2147483647], got " + std::to_string(v), at);
  return static_cast<int32_t>(v);
}

std::vector<int32_t> token_ids(const py::handle& seq, const std::string& name) {
  std::vector<int32_t> out;
  size_t i = 0;
  for (auto item : seq)
    out.push_back(token_id(item, name + "[" + std::to_string(i++) + "]"));
  return out;
}

/// Keyword arguments of complete() and stream(), as Python passes them.
struct request_args {
  py::object prompt;
  py::object messages;
  int32_t max_tokens = 16;
  float temperature = 1.0f;
  float top_p = 1.0f;
  int32_t top_k = 0;
  float min_p = 0.0f;
  std::optional<uint64_t> seed;
  std::vector<std::string> stop;
  py::object stop_token_ids;
  bool ignore_eos = false;
  int32_t min_tokens = 0;
  float repetition_penalty = 1.0f;
  float frequency_penalty = 0.0f;
  float presence_penalty = 0.0f;
  bool logprobs = false;
  int32_t top_logprobs = 0;
  std::string model;
  int32_t priority = 0;
  std::optional<std::string> api_key;
  bool detokenize = true;
};

sdk::request make_request(const request_args& a, const std::string& default_key) {
  sdk::request r;
  const bool has_prompt = !a.prompt.is_none(), has_messages = !a.messages.is_none();
  if (has_prompt == has_messages)
    bad_argument("give exactly one of prompt (a str or a list of token ids) and messages", "prompt");
  if (has_prompt) {
    if (py::isinstance<py::str>(a.prompt))
      r.prompt = a.prompt.cast<std::string>();
    else if (py::isinstance<py::list>(a.prompt) || py::isinstance<py::tuple>(a.prompt))
      r.prompt_ids = token_ids(a.prompt, "prompt");
    else
      bad_argument("prompt must be a str or a list of token ids, got " +
                     py::str(py::type::of(a.prompt).attr("__name__")).cast<std::string>(),
                   "prompt");
    if (r.prompt.empty() && r.prompt_ids.empty())
      bad_argument("prompt must not be empty", "prompt");
  } else {
    if (!py::isinstance<py::list>(a.messages) && !py::isinstance<py::tuple>(a.messages))
      bad_argument("messages must be a list of {'role': ..., 'content': ...} dicts", "messages");
    size_t i = 0;
    for (auto m : a.messages) {
      const auto at = "messages[" + std::to_string(i++) + "]";
      if (!py::isinstance<py::dict>(m))
        bad_argument(at + " must be a dict with 'role' and 'content'", at);
      auto d = m.cast<py::dict>();
      if (!d.contains("role") || !d.contains("content") || !py::isinstance<py::str>(d["role"]) ||
          !py::isinstance<py::str>(d["content"]))
        bad_argument(at + " must have str 'role' and 'content'", at);
      r.messages.push_back({d["role"].cast<std::string>(), d["content"].cast<std::string>()});
    }
    if (r.messages.empty())
      bad_argument("messages must not be empty", "messages");
  }
  r.model = a.model;
  r.priority = a.priority;
  r.api_key = a.api_key.value_or(default_key);
  r.detokenize = a.detokenize;
  r.logprobs = a.logprobs;
  r.top_logprobs = a.top_logprobs;
  auto& p = r.params;
  p.max_tokens = a.max_tokens;
  p.temperature = a.temperature;
  p.top_p = a.top_p;
  p.top_k = a.top_k;
  p.min_p = a.min_p;
  p.seed = a.seed;
  p.stop = a.stop;
  if (!a.stop_token_ids.is_none())
    p.stop_token_ids = token_ids(a.stop_token_ids, "stop_token_ids");
  p.ignore_eos = a.ignore_eos;
  p.min_tokens = a.min_tokens;
  p.repetition_penalty = a.repetition_penalty;
  p.frequency_penalty = a.frequency_penalty;
  p.presence_penalty = a.presence_penalty;
  return r;
}

/// Waits, without the GIL, until `s` has news; a pending Ctrl-C (or any
/// signal whose Python handler raises) cancels the request and raises.
void wait_news(sdk::stream& s) {
  for (;;) {
    bool ready = false;
    {
      py::gil_scoped_release nogil;
      ready = s.wait_for(signal_poll);
    }
    if (PyErr_CheckSignals() != 0) {
      s.cancel(); // frees it on the workers before the exception leaves
      throw py::error_already_set();
    }
    if (ready)
      return;
  }
}

/// A request's answer as it arrives: iterate it for chunk dicts. Leaving a
/// `with` block, cancel(), or dropping it before the end cancels the request.
class py_stream {
public:
  explicit py_stream(sdk::stream s) : s_(std::move(s)) {}
  py_stream(const py_stream&) = delete;
  py_stream& operator=(const py_stream&) = delete;
  ~py_stream() { s_.cancel(); } // no effect once it ended

  py::dict next() {
    if (ended_)
      throw py::stop_iteration();
    wait_news(s_);
    std::optional<sdk::chunk> c;
    {
      py::gil_scoped_release nogil;
      try {
        c = s_.next(); // returns at once: wait_news saw news
      } catch (...) {
        ended_ = true;
        throw;
      }
    }
    if (!c) {
      ended_ = true;
      throw py::stop_iteration();
    }
    return chunk_dict(*c);
  }

  void cancel() { s_.cancel(); }
  [[nodiscard]] uint64_t id() const { return s_.id(); }

private:
  sdk::stream s_;
  bool ended_ = false;
};

/// A connection to a cluster's frontend node.
class py_client {
public:
  py_client(const std::string& address, std::optional<std::string> cluster_secret_file,
            std::optional<std::string> cluster_secret, std::optional<std::string> api_key,
            std::optional<std::string> node_id, double timeout_s, double connect_timeout_s,
            const std::string& ucx_tls)
      : api_key_(api_key.value_or("")) {
    auto ms = [](double s, const char* name) {
      if (!(s > 0) || s > 86400)
        bad_argument(std::string(name) + " must be in (0, 86400] seconds, got " + std::to_string(s), name);
      return std::chrono::milliseconds{static_cast<int64_t>(s * 1000)};
    };
    sdk::options o;
    o.cluster_secret = cluster_secret.value_or("");
    o.cluster_secret_file = cluster_secret_file.value_or("");
    o.node_id = node_id.value_or("");
    o.timeout = ms(timeout_s, "timeout");
    o.connect_timeout = ms(connect_timeout_s, "connect_timeout");
    o.ucx_tls = ucx_tls;
    py::gil_scoped_release nogil;
    c_ = sdk::client::connect(address, std::move(o));
  }

  ~py_client() {
    py::gil_scoped_release nogil;
    c_.reset();
  }

  py::dict complete(const request_args& a) {
    auto s = get().submit(make_request(a, api_key_), [](const sdk::chunk&) {});
    wait_news(s); // with a callback, news is the end (or a timeout)
    sdk::result r;
    {
      py::gil_scoped_release nogil;
      r = s.wait();
    }
    return result_dict(r);
  }

  std::unique_ptr<py_stream> stream(const request_args& a) {
    return std::make_unique<py_stream>(get().submit(make_request(a, api_key_)));
  }

  std::vector<std::string> models() {
    py::gil_scoped_release nogil;
    return get().models();
  }

  py::dict health() {
    sdk::cluster_info h;
    {
      py::gil_scoped_release nogil;
      h = get().health();
    }
    py::dict d;
    d["models"] = h.models;
    d["ready"] = h.ready;
    d["healthy_workers"] = h.healthy_workers;
    d["workers"] = h.workers;
    d["max_model_len"] = h.max_model_len;
    d["draining"] = h.draining;
    return d;
  }

  [[nodiscard]] std::string node_id() { return get().node_id(); }

  void close() {
    py::gil_scoped_release nogil;
    c_.reset();
  }

private:
  sdk::client& get() {
    if (!c_)
      raise_sdk(sdk::client_errc::unavailable, 503, "the client is closed", "service_unavailable");
    return *c_;
  }

  std::unique_ptr<sdk::client> c_;
  std::string api_key_;
};

/// complete() and stream() take the same keywords; this binds one of them.
template <class Fn>
auto bind_request(Fn fn) {
  return [fn](py_client& c, py::object prompt, py::object messages, int32_t max_tokens, float temperature,
              float top_p, int32_t top_k, float min_p, std::optional<uint64_t> seed,
              std::vector<std::string> stop, py::object stop_token_ids, bool ignore_eos, int32_t min_tokens,
              float repetition_penalty, float frequency_penalty, float presence_penalty, bool logprobs,
              int32_t top_logprobs, std::string model, int32_t priority, std::optional<std::string> api_key,
              bool detokenize) {
    request_args a{std::move(prompt),
                   std::move(messages),
                   max_tokens,
                   temperature,
                   top_p,
                   top_k,
                   min_p,
                   seed,
                   std::move(stop),
                   std::move(stop_token_ids),
                   ignore_eos,
                   min_tokens,
                   repetition_penalty,
                   frequency_penalty,
                   presence_penalty,
                   logprobs,
                   top_logprobs,
                   std::move(model),
                   priority,
                   std::move(api_key),
                   detokenize};
    return fn(c, a);
  };
}

} // namespace

PYBIND11_MODULE(tessera_sdk, m) {
  m.doc() = "The Tessera client SDK: requests to a Tessera cluster's frontend over its cluster wire "
            "(UCX and the cluster secret), without HTTP.";

  error_class = PyErr_NewExceptionWithDoc(
    "tessera_sdk.Error",
    "A failed call, as the HTTP API would have answered it: status (HTTP status), type (OpenAI error "
    "type), code and param (None when there is none), message, and kind ('bad_request', "
    "'unauthorized', ...; 'cancelled' with status 499 for a cancelled request).",
    PyExc_Exception, nullptr);
  if (error_class == nullptr)
    throw py::error_already_set();
  m.attr("Error") = py::handle(error_class);
  py::register_exception_translator([](std::exception_ptr p) {
    try {
      if (p)
        std::rethrow_exception(p);
    } catch (const sdk::error& e) {
      set_python_error(e);
    }
  });

  py::class_<py_stream>(m, "Stream",
                        "A request's answer as it arrives: iterating yields chunk dicts (tokens, text, "
                        "finish_reason, stop_reason, prompt_tokens, cached_prompt_tokens, output_tokens, "
                        "logprobs). Leaving a `with` block, cancel() or dropping it early cancels the request.")
    .def("__iter__", [](py::object self) { return self; })
    .def("__next__", &py_stream::next)
    .def("cancel", &py_stream::cancel, "Stops the request and frees it on the cluster; no effect once it ended.")
    .def_property_readonly("id", &py_stream::id)
    .def("__enter__", [](py::object self) { return self; })
    .def("__exit__", [](py_stream& s, py::object, py::object, py::object) {
      s.cancel();
      return false;
    });

#define TESSERA_SDK_REQUEST_ARGS                                                                                  \
  py::arg("prompt") = py::none(), py::kw_only(), py::arg("messages") = py::none(), py::arg("max_tokens") = 16,   \
  py::arg("temperature") = 1.0f, py::arg("top_p") = 1.0f, py::arg("top_k") = 0, py::arg("min_p") = 0.0f,        \
  py::arg("seed") = py::none(), py::arg("stop") = std::vector<std::string>{},                                    \
  py::arg("stop_token_ids") = py::none(), py::arg("ignore_eos") = false, py::arg("min_tokens") = 0,              \
  py::arg("repetition_penalty") = 1.0f, py::arg("frequency_penalty") = 0.0f, py::arg("presence_penalty") = 0.0f, \
  py::arg("logprobs") = false, py::arg("top_logprobs") = 0, py::arg("model") = "", py::arg("priority") = 0,      \
  py::arg("api_key") = py::none(), py::arg("detokenize") = true

  py::class_<py_client>(m, "Client", "A connection to a Tessera cluster's frontend node.")
    .def(py::init<const std::string&, std::optional<std::string>, std::optional<std::string>,
                  std::optional<std::string>, std::optional<std::string>, double, double, const std::string&>(),
         py::arg("address"), py::kw_only(), py::arg("cluster_secret_file") = py::none(),
         py::arg("cluster_secret") = py::none(), py::arg("api_key") = py::none(), py::arg("node_id") = py::none(),
         py::arg("timeout") = 60.0, py::arg("connect_timeout") = 10.0, py::arg("ucx_tls") = "tcp",
         "Connects to the frontend node at address ('host:port', its cluster address) with the cluster "
         "secret (or its file, mode 600). api_key: the tenant's key, used by every request that names "
         "none. timeout: seconds without news before a request fails. Raises Error (status 401: the "
         "secret was refused; 503: nobody answered).")
    .def("complete", bind_request([](py_client& c, const request_args& a) { return c.complete(a); }),
         TESSERA_SDK_REQUEST_ARGS,
         "The whole answer as a dict: model, prompt_token_ids, token_ids, text, finish_reason, "
         "cached_prompt_tokens, logprobs (None unless asked: [{token, logprob, top_logprobs: "
         "[{token, logprob}]}]). prompt: a str (completion) or a list of token ids; or messages "
         "([{'role', 'content'}], a chat). Ctrl-C cancels it. Raises Error.")
    .def("stream", bind_request([](py_client& c, const request_args& a) { return c.stream(a); }),
         TESSERA_SDK_REQUEST_ARGS, py::keep_alive<0, 1>(),
         "Submits the request; returns a Stream of chunk dicts. Same arguments as complete().")
    .def(
      "cancel", [](py_client&, py_stream& s) { s.cancel(); }, py::arg("stream"),
      "Cancels `stream`'s request (as stream.cancel()).")
    .def("models", &py_client::models, "The served model names.")
    .def("health", &py_client::health,
         "A dict: models, ready (a complete serving path is healthy), healthy_workers, workers, "
         "max_model_len, draining.")
    .def_property_readonly("node_id", &py_client::node_id)
    .def("close", &py_client::close, "Closes the connection; running streams fail with status 503.")
    .def("__enter__", [](py::object self) { return self; })
    .def("__exit__", [](py_client& c, py::object, py::object, py::object) {
      c.close();
      return false;
    });
#undef TESSERA_SDK_REQUEST_ARGS
}
