#include "actors/frontend/tenant_limits.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::actors::frontend {

void tenant_limits::refill(entry& e, clock::time_point now) const {
  if (!e.limit.units_per_minute)
    return;
  const double capacity = *e.limit.units_per_minute;
  // A clock that went backwards (it does not: steady) refills nothing.
  const double seconds = std::max(0.0, std::chrono::duration<double>(now - e.refilled).count());
  e.balance = std::min(capacity, e.balance + seconds * capacity / 60.0);
  e.refilled = std::max(e.refilled, now);
}

tenant_admission tenant_limits::admit(const std::string& tenant, const tenant_limit& limit,
                                      double admission_units, clock::time_point now, double output_units) {
  auto [it, fresh] = tenants_.try_emplace(tenant);
  auto& e = it->second;
  const bool had_bucket = !fresh && e.limit.units_per_minute.has_value();
  if (!fresh)
    refill(e, now);
  e.limit = limit;
  e.dropped = false;
  if (e.limit.units_per_minute && !had_bucket) {
    // A new bucket (a new tenant, or one that was unlimited) starts full.
    e.balance = *e.limit.units_per_minute;
    e.refilled = now;
  } else if (e.limit.units_per_minute) {
    // A reload may have shrunk the capacity.
    e.balance = std::min(e.balance, *e.limit.units_per_minute);
  }

  tenant_admission a;
  a.balance = e.balance;
  if (e.limit.units_per_minute) {
    const double capacity = *e.limit.units_per_minute;
    // Written so that NaN, a non-positive capacity and a cost over it all
    // land here: no wait makes them fit.
    if (!(admission_units <= capacity) || !(capacity > 0)) {
      a.limit = tenant_limit_kind::never_fits;
      return a;
    }
    // The hold is capped so that every admission that fits can be admitted
    // once the bucket is full; NaN or a negative hold holds nothing.
    a.held = output_units > 0 ? std::min(output_units, capacity - std::max(0.0, admission_units)) : 0.0;
  }
  if (e.limit.max_concurrent && e.in_flight >= *e.limit.max_concurrent) {
    a.limit = tenant_limit_kind::concurrency;
    a.retry_after_s = 1.0;
    return a;
  }
  const double cost = std::max(0.0, admission_units) + a.held;
  if (e.limit.units_per_minute && e.balance < cost) {
    a.limit = tenant_limit_kind::units;
    a.retry_after_s = (cost - e.balance) * 60.0 / *e.limit.units_per_minute;
    return a;
  }
  if (e.limit.units_per_minute)
    e.balance -= cost;
  ++e.in_flight;
  a.admitted = true;
  a.balance = e.balance;
  return a;
}

void tenant_limits::charge_output(const std::string& tenant, int64_t tokens, int64_t context,
                                  clock::time_point now, double* held) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || tokens <= 0 || !it->second.limit.units_per_minute)
    return;
  double cost = units_.decode(context, tokens);
  if (held != nullptr && *held > 0) {
    const double from_hold = std::min(*held, cost);
    *held -= from_hold;
    cost -= from_hold;
  }
  if (cost <= 0)
    return;
  refill(it->second, now);
  it->second.balance -= cost;
}

void tenant_limits::release(const std::string& tenant, double unused_hold, clock::time_point now) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || it->second.in_flight <= 0)
    return;
  auto& e = it->second;
  if (e.limit.units_per_minute && unused_hold > 0) {
    refill(e, now);
    e.balance = std::min(*e.limit.units_per_minute, e.balance + unused_hold);
  }
  if (--e.in_flight == 0 && e.dropped)
    tenants_.erase(it);
}

void tenant_limits::forget_absent(const std::set<std::string>& names) {
  for (auto it = tenants_.begin(); it != tenants_.end();) {
    if (names.contains(it->first)) {
      ++it;
    } else if (it->second.in_flight > 0) {
      it->second.dropped = true;
      ++it;
    } else {
      it = tenants_.erase(it);
    }
  }
}

std::optional<double> tenant_limits::balance(const std::string& tenant, clock::time_point now) {
  auto it = tenants_.find(tenant);
  if (it == tenants_.end() || !it->second.limit.units_per_minute)
    return std::nullopt;
  refill(it->second, now);
  return it->second.balance;
}

int32_t tenant_limits::in_flight(const std::string& tenant) const {
  auto it = tenants_.find(tenant);
  return it == tenants_.end() ? 0 : it->second.in_flight;
}

namespace {

std::string units_text(double units) {
  char buf[64];
  std::snprintf(buf, sizeof(buf), "%.6g", units);
  return buf;
}

} // namespace

api_error tenant_refusal_error(const std::string& tenant, const tenant_limit& limit,
                               const tenant_admission& a, double admission_units) {
  api_error e;
  e.status = 429;
  e.type = "rate_limit_error";
  e.code = "rate_limit_exceeded";
  const auto who = "tenant '" + tenant + "'";
  switch (a.limit) {
  case tenant_limit_kind::never_fits:
    e.status = 400;
    e.type = "invalid_request_error";
    e.code = "request_exceeds_rate_limit";
    e.param = "prompt";
    e.message = "this request's prompt costs " + units_text(admission_units) + " model units, more than " +
                who + "'s whole rate limit of " + units_text(limit.units_per_minute.value_or(0)) +
                " units per minute: it can never be admitted (shorten the prompt)";
    break;
  case tenant_limit_kind::concurrency:
    e.message = who + " has " + std::to_string(limit.max_concurrent.value_or(0)) +
                " requests in flight, its max_concurrent; retry after one of them ends";
    break;
  default:
    e.message = who + " is over its rate limit of " + units_text(limit.units_per_minute.value_or(0)) +
                " model units per minute: this request costs " + units_text(admission_units) +
                " units to admit" +
                (a.held > 0 ? " and holds " + units_text(a.held) + " more for its max_tokens of output" : "") +
                ", and the tenant's balance is " + units_text(a.balance) + "; retry in " +
                std::to_string(retry_after_header_s(a)) + " s";
    break;
  }
  return e;
}

int64_t retry_after_header_s(const tenant_admission& a) {
  // Clamped so that a balance far below zero still makes a sane header.
  return static_cast<int64_t>(std::clamp(std::ceil(a.retry_after_s), 1.0, 86400.0));
}

int32_t request_priority(std::optional<int32_t> requested, std::optional<int32_t> tenant_priority) {
  int32_t p = requested.value_or(tenant_priority.value_or(0));
  if (tenant_priority)
    p = std::min(p, *tenant_priority);
  return std::clamp(p, -max_request_priority, max_request_priority);
}

} // namespace tessera::actors::frontend
