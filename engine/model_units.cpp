#include "engine/model_units.hpp"

#include <algorithm>
#include <array>
#include <cmath>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <limits>
#include <sstream>
#include <unistd.h>

#include <nlohmann/json.hpp>
#include <spdlog/spdlog.h>

#include "engine/engine_errc.hpp"

namespace tessera::engine {

namespace {

using nlohmann::json;

constexpr size_t max_serving_config_bytes = size_t{1} << 20;

std::string num(double v) {
  char buf[32];
  std::snprintf(buf, sizeof buf, "%g", v);
  return buf;
}

std::filesystem::path config_path(const std::string& model_dir) {
  return std::filesystem::path{model_dir} / serving_config_file;
}

/// The whole file as JSON; a null json when it does not exist.
caf::expected<json> load(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::exists(path, ec))
    return json{};
  const auto size = std::filesystem::file_size(path, ec);
  if (ec)
    return make_engine_error(engine_errc::bad_config, path.string() + ": cannot read: " + ec.message());
  if (size > max_serving_config_bytes)
    return make_engine_error(engine_errc::bad_config, path.string() + ": " + std::to_string(size)
                                                        + " bytes, more than the 1 MiB a serving config may have");
  std::ifstream in{path, std::ios::binary};
  std::stringstream buf;
  buf << in.rdbuf();
  if (!in)
    return make_engine_error(engine_errc::bad_config, path.string() + ": cannot read");
  auto j = json::parse(buf.str(), nullptr, false);
  if (j.is_discarded())
    return make_engine_error(engine_errc::bad_config, path.string() + ": not valid JSON");
  if (!j.is_object())
    return make_engine_error(engine_errc::bad_config,
                             path.string() + ": must be a JSON object, got " + std::string{j.type_name()});
  return j;
}

caf::error check_units(const model_units& u, const std::string& where) {
  const std::array<std::pair<const char*, double>, 4> fields{{{"a", u.per_input_token},
                                                              {"b", u.per_output_token},
                                                              {"c", u.per_request},
                                                              {"d", u.per_context_token}}};
  for (const auto& [name, v] : fields)
    if (!std::isfinite(v) || v < 0)
      return make_engine_error(engine_errc::bad_config,
                               where + "." + name + " must be finite and >= 0, got " + num(v));
  if (u.per_input_token == 0 && u.per_output_token == 0 && u.per_request == 0 && u.per_context_token == 0)
    return make_engine_error(engine_errc::bad_config, where + ": a, b, c and d are all 0 (every request free)");
  return {};
}

caf::expected<fitted_units> entry_of(const json& e, const std::string& where) {
  if (!e.is_object())
    return make_engine_error(engine_errc::bad_config,
                             where + " must be an object, got " + std::string{e.type_name()});
  fitted_units out;
  auto number = [&](const char* key, double& v) -> caf::error {
    auto it = e.find(key);
    if (it == e.end())
      return make_engine_error(engine_errc::bad_config, where + "." + key + " is missing");
    if (!it->is_number())
      return make_engine_error(engine_errc::bad_config, where + "." + key + " must be a number, got "
                                                          + std::string{it->type_name()});
    v = it->get<double>();
    return {};
  };
  if (auto err = number("a", out.units.per_input_token))
    return err;
  if (auto err = number("b", out.units.per_output_token))
    return err;
  if (auto err = number("c", out.units.per_request))
    return err;
  if (e.contains("d")) // written before the context term: d = 0
    if (auto err = number("d", out.units.per_context_token))
      return err;
  if (auto err = check_units(out.units, where))
    return err;
  if (auto it = e.find("fitted_at"); it != e.end()) {
    if (!it->is_string())
      return make_engine_error(engine_errc::bad_config, where + ".fitted_at must be a string");
    out.fitted_at = it->get<std::string>();
  }
  if (auto it = e.find("rms_error"); it != e.end()) {
    if (!it->is_number() || !std::isfinite(it->get<double>()) || it->get<double>() < 0)
      return make_engine_error(engine_errc::bad_config, where + ".rms_error must be a finite number >= 0");
    out.rms_error = it->get<double>();
  }
  return out;
}

constexpr size_t num_features = 4; // in, out, 1, context (in * out + out * (out - 1) / 2)
using vec = std::array<double, num_features>;

vec features(const units_sample& x) {
  const auto in = static_cast<double>(x.input_tokens);
  const auto out = static_cast<double>(x.output_tokens);
  return {in, out, 1.0, in * out + out * (out - 1) / 2};
}

/// Solves the k x k system m * x = r (k <= 4) in place; false if singular.
bool solve(std::array<vec, num_features> m, vec r, size_t k, vec& x) {
  double scale = 0;
  for (size_t i = 0; i < k; ++i)
    scale = std::max(scale, std::abs(m[i][i]));
  for (size_t col = 0; col < k; ++col) {
    size_t piv = col;
    for (size_t i = col + 1; i < k; ++i)
      if (std::abs(m[i][col]) > std::abs(m[piv][col]))
        piv = i;
    if (std::abs(m[piv][col]) <= 1e-10 * scale)
      return false;
    std::swap(m[piv], m[col]);
    std::swap(r[piv], r[col]);
    for (size_t i = col + 1; i < k; ++i) {
      const double f = m[i][col] / m[col][col];
      for (size_t j = col; j < k; ++j)
        m[i][j] -= f * m[col][j];
      r[i] -= f * r[col];
    }
  }
  for (size_t i = k; i-- > 0;) {
    double v = r[i];
    for (size_t j = i + 1; j < k; ++j)
      v -= m[i][j] * x[j];
    x[i] = v / m[i][i];
  }
  return true;
}

/// Least squares over the features in `mask` (bit f: features()[f]),
/// weighted by 1/cost^2 (the relative error is what is minimised: a long
/// request's noise must not swamp a short one's cost). Each column is
/// scaled to a largest value of 1 first, so the context term's millions
/// sit beside the intercept's 1 without losing the system's condition.
/// nullopt: singular.
std::optional<vec> fit_subset(std::span<const units_sample> s, unsigned mask) {
  std::array<size_t, num_features> cols{};
  size_t k = 0;
  for (size_t f = 0; f < num_features; ++f)
    if (mask & (1u << f))
      cols[k++] = f;
  vec colscale{};
  for (const auto& x : s) {
    const auto feat = features(x);
    for (size_t f = 0; f < num_features; ++f)
      colscale[f] = std::max(colscale[f], std::abs(feat[f]));
  }
  for (size_t i = 0; i < k; ++i)
    if (colscale[cols[i]] == 0)
      return std::nullopt; // a feature 0 everywhere: nothing to fit
  std::array<vec, num_features> m{};
  vec r{};
  for (const auto& x : s) {
    auto feat = features(x);
    for (size_t f = 0; f < num_features; ++f)
      feat[f] = colscale[f] > 0 ? feat[f] / colscale[f] : 0;
    const double w = 1.0 / (x.cost * x.cost);
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j)
        m[i][j] += w * feat[cols[i]] * feat[cols[j]];
      r[i] += w * feat[cols[i]] * x.cost;
    }
  }
  vec sol{};
  if (!solve(m, r, k, sol))
    return std::nullopt;
  vec out{};
  for (size_t i = 0; i < k; ++i)
    out[cols[i]] = sol[i] / colscale[cols[i]];
  return out;
}

} // namespace

std::string units_engine_key(std::string_view backend_kind, std::string_view sim_gpu) {
  if (backend_kind == "sim")
    return "sim-" + std::string{sim_gpu};
  return std::string{backend_kind};
}

caf::expected<std::optional<fitted_units>> read_model_units(const std::string& model_dir,
                                                             std::string_view engine_key) {
  const auto path = config_path(model_dir);
  auto j = load(path);
  if (!j)
    return j.error();
  if (j->is_null())
    return std::optional<fitted_units>{};
  auto it = j->find(std::string{engine_key});
  if (it == j->end())
    return std::optional<fitted_units>{};
  auto e = entry_of(*it, path.string() + ": \"" + std::string{engine_key} + "\"");
  if (!e)
    return e.error();
  return std::optional<fitted_units>{std::move(*e)};
}

caf::expected<model_units> serving_units(const std::string& model_dir, std::string_view engine_key) {
  auto f = read_model_units(model_dir, engine_key);
  if (!f)
    return f.error();
  if (!*f) {
    spdlog::info("model units for {} on {} are not fitted (no \"{}\" in {}): a = 1, b = 1, c = 0, d = 0 "
                 "(tokens); run `tessera bench units --model-dir {} --write`",
                 model_dir, engine_key, engine_key, serving_config_file, model_dir);
    return model_units{};
  }
  const auto& u = (*f)->units;
  spdlog::info("model units for {} on {}: a = {:.6g}, b = {:.6g}, c = {:.6g}, d = {:.6g} (fitted {}, error {:.1f}%)",
               model_dir, engine_key, u.per_input_token, u.per_output_token, u.per_request, u.per_context_token,
               (*f)->fitted_at, 100.0 * (*f)->rms_error);
  return u;
}

caf::error write_model_units(const std::string& model_dir, std::string_view engine_key,
                             const fitted_units& u) {
  const auto path = config_path(model_dir);
  if (auto err = check_units(u.units, "units for \"" + std::string{engine_key} + "\""))
    return err;
  if (engine_key.empty())
    return make_engine_error(engine_errc::bad_config, "the engine key of fitted units is empty");
  auto j = load(path);
  if (!j)
    return j.error();
  if (j->is_null())
    *j = json::object();
  (*j)[std::string{engine_key}] = json{{"a", u.units.per_input_token},
                                       {"b", u.units.per_output_token},
                                       {"c", u.units.per_request},
                                       {"d", u.units.per_context_token},
                                       {"fitted_at", u.fitted_at},
                                       {"rms_error", u.rms_error}};
  auto tmp = path;
  tmp += ".tmp." + std::to_string(::getpid());
  {
    std::ofstream out{tmp, std::ios::binary | std::ios::trunc};
    out << j->dump(2) << "\n";
    out.flush();
    if (!out) {
      std::error_code ec;
      std::filesystem::remove(tmp, ec);
      return make_engine_error(engine_errc::device_error, tmp.string() + ": cannot write");
    }
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) {
    std::filesystem::remove(tmp, ec);
    return make_engine_error(engine_errc::device_error,
                             "cannot rename " + tmp.string() + " to " + path.string() + ": " + ec.message());
  }
  return {};
}

caf::expected<units_fit> fit_model_units(std::span<const units_sample> samples, bool context_term) {
  if (samples.size() < 3)
    return make_engine_error(engine_errc::bad_request, "fitting a, b and c needs at least 3 samples, got "
                                                         + std::to_string(samples.size()));
  for (size_t i = 0; i < samples.size(); ++i) {
    const auto& s = samples[i];
    if (s.input_tokens < 0 || s.output_tokens < 0)
      return make_engine_error(engine_errc::bad_request,
                               "sample " + std::to_string(i) + " has a negative token count");
    if (!std::isfinite(s.cost) || s.cost <= 0)
      return make_engine_error(engine_errc::bad_request, "sample " + std::to_string(i)
                                                           + " has cost " + num(s.cost) + "; must be finite and > 0");
  }
  if (!fit_subset(samples, 7u))
    return make_engine_error(engine_errc::bad_request,
                             "the samples cannot separate a, b and c: vary both input and output lengths");
  // Non-negative least squares: the NNLS optimum is the unconstrained fit
  // on its own set of non-zero coefficients, so the best fit with all
  // coefficients >= 0 over every subset (15 with d, 7 without) is it.
  auto rel_sse = [&](const vec& x) {
    double e = 0;
    for (const auto& s : samples) {
      const auto f = features(s);
      double p = 0;
      for (size_t i = 0; i < num_features; ++i)
        p += x[i] * f[i];
      e += ((p - s.cost) / s.cost) * ((p - s.cost) / s.cost);
    }
    return e;
  };
  std::optional<vec> best;
  double best_err = std::numeric_limits<double>::infinity();
  const unsigned masks = context_term ? 16u : 8u;
  for (unsigned mask = 1; mask < masks; ++mask) {
    auto x = fit_subset(samples, mask);
    if (!x || std::any_of(x->begin(), x->end(), [](double v) { return !(v >= 0); }))
      continue;
    // Ties (within rounding) keep the earlier subset: the one without d.
    const double e = rel_sse(*x);
    if (e < best_err - 1e-12) {
      best_err = e;
      best = x;
    }
  }
  if (!best)
    return make_engine_error(engine_errc::bad_request, "no fit with a, b, c, d >= 0 exists for these samples");
  units_fit out;
  out.units = {(*best)[0], (*best)[1], (*best)[2], (*best)[3]};
  for (const auto& s : samples)
    out.predicted.push_back(out.units.cost(s.input_tokens, s.output_tokens));
  out.rms_relative_error = std::sqrt(best_err / static_cast<double>(samples.size()));
  return out;
}

} // namespace tessera::engine
