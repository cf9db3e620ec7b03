#include "chaos/scenario.hpp"

#include <algorithm>
#include <fstream>
#include <sstream>

#include <caf/sec.hpp>
#include <toml++/toml.h>

#include "cluster/nearest_name.hpp"
#include "cluster/toml_reader.hpp"

namespace tessera::chaos {

namespace {

using cluster::did_you_mean;
using cluster::quote_input;
using view = toml::node_view<const toml::node>;

const std::vector<std::string> top_keys{"name", "description", "duration_s", "grace_s", "seed", "load", "event"};
const std::vector<std::string> load_keys{"rate",        "prompt_tokens",   "max_tokens", "seeded_fraction",
                                         "temperature", "shared_prefixes", "prefix_tokens"};
const std::vector<std::string> event_keys{"at_s", "action", "node", "plan"};
const std::vector<std::string> action_names{"kill",   "term",      "stop",     "cont",
                                            "restart", "faults", "disk-full", "disk-heal"};

using reader = cluster::toml_reader;
using cluster::toml_reader;

void read_load(reader& r, const view& v, load_spec& l) {
  auto* t = v.as_table();
  if (t == nullptr) {
    r.problem("'load' must be a table ([load])");
    return;
  }
  r.known_keys(*t, load_keys, "load.");
  r.flt(v["rate"], "load.rate", 0, 10'000, l.rate, true);
  r.num(v["max_tokens"], "load.max_tokens", 1, 1 << 16, l.max_tokens);
  r.flt(v["seeded_fraction"], "load.seeded_fraction", 0, 1, l.seeded_fraction);
  r.flt(v["temperature"], "load.temperature", 0, 2, l.temperature, true);
  r.num(v["shared_prefixes"], "load.shared_prefixes", 0, 1024, l.shared_prefixes);
  r.num(v["prefix_tokens"], "load.prefix_tokens", 0, 1 << 16, l.prefix_tokens);
  if ((l.shared_prefixes > 0) != (l.prefix_tokens > 0))
    r.problem("'load.shared_prefixes' and 'load.prefix_tokens' go together: both above 0, or both 0 (no shared "
              "prefix)");
  if (!v["prompt_tokens"])
    return;
  auto* a = v["prompt_tokens"].as_array();
  std::optional<int64_t> lo, hi;
  if (a != nullptr && a->size() == 2) {
    lo = (*a)[0].value_exact<int64_t>();
    hi = (*a)[1].value_exact<int64_t>();
  }
  if (!lo || !hi || *lo < 1 || *hi < *lo || *hi > (1 << 20)) {
    r.problem("'load.prompt_tokens' must be [lo, hi] with 1 <= lo <= hi <= 1048576");
    return;
  }
  l.prompt_tokens_min = static_cast<int32_t>(*lo);
  l.prompt_tokens_max = static_cast<int32_t>(*hi);
}

void read_event(reader& r, const toml::node& entry, size_t i, scenario_event& e) {
  const std::string at = "event[" + std::to_string(i) + "]";
  auto* t = r.entry_table(entry, at, event_keys, " ([[event]])");
  if (t == nullptr)
    return;
  const view v{*t};
  if (!v["at_s"])
    r.problem(at + ".at_s is missing (seconds after the load started)");
  r.flt(v["at_s"], at + ".at_s", 0, 1e6, e.at_s);
  std::string action;
  r.str(v["action"], at + ".action", action);
  const auto known = std::find(action_names.begin(), action_names.end(), action);
  if (!v["action"])
    r.problem(at + ".action is missing (one of kill, term, stop, cont, restart, faults, disk-full, disk-heal)");
  else if (known == action_names.end())
    r.problem(at + ".action: unknown action " + quote_input(action) + did_you_mean(action, action_names) +
              " (use kill, term, stop, cont, restart, faults, disk-full, disk-heal)");
  else
    e.action = static_cast<event_action>(known - action_names.begin());
  r.str(v["node"], at + ".node", e.node);
  if (!v["node"] || e.node.empty())
    r.problem(at + ".node is missing (a node id of the cluster config)");
  r.str(v["plan"], at + ".plan", e.plan);
  if (known != action_names.end()) {
    const bool faults = e.action == event_action::faults;
    if (faults && !v["plan"])
      r.problem(at + " is a faults event without a plan (plan = \"\" heals and clears the node's faults)");
    if (!faults && v["plan"])
      r.problem(at + ".plan is only for action = \"faults\", not " + quote_input(action));
  }
}

} // namespace

std::string_view to_string(event_action a) {
  return action_names[static_cast<size_t>(a)];
}

std::vector<std::string> scenario::disk_fault_nodes() const {
  std::vector<std::string> out;
  for (const auto& e : events)
    if ((e.action == event_action::disk_full || e.action == event_action::disk_heal) &&
        std::find(out.begin(), out.end(), e.node) == out.end())
      out.push_back(e.node);
  return out;
}

bool scenario::uses_faults() const {
  return std::any_of(events.begin(), events.end(), [](const auto& e) { return e.action == event_action::faults; });
}

caf::expected<scenario> parse_scenario(std::string_view text, const std::string& name) {
  reader r{name};
  toml::table t;
  try {
    t = toml::parse(text, name);
  } catch (const toml::parse_error& e) {
    std::ostringstream os;
    os << e.description() << " (line " << e.source().begin.line << ")";
    r.problem(os.str());
    return r.error();
  }
  scenario s;
  s.name = std::filesystem::path{name}.stem().string();
  r.known_keys(t, top_keys, "");
  const view root{t};
  r.str(root["name"], "name", s.name);
  r.str(root["description"], "description", s.description);
  r.flt(root["duration_s"], "duration_s", 0, 86'400, s.duration_s, true);
  r.flt(root["grace_s"], "grace_s", 0, 3'600, s.grace_s);
  if (root["seed"]) {
    auto x = root["seed"].value_exact<int64_t>();
    if (!x || *x < 0)
      r.problem("'seed' must be a non-negative integer");
    else
      s.seed = static_cast<uint64_t>(*x);
  }
  if (root["load"])
    read_load(r, root["load"], s.load);
  if (root["event"]) {
    auto* events = root["event"].as_array();
    if (events == nullptr) {
      r.problem("'event' must be an array of tables ([[event]])");
    } else {
      for (size_t i = 0; i < events->size(); ++i) {
        scenario_event e;
        read_event(r, (*events)[i], i, e);
        if (e.at_s >= s.duration_s + s.grace_s)
          r.problem("event[" + std::to_string(i) + "].at_s = " + toml_reader::number_text(e.at_s) +
                    " is after the run (duration_s + grace_s = " +
                    toml_reader::number_text(s.duration_s + s.grace_s) + ")");
        s.events.push_back(std::move(e));
      }
    }
  }
  if (!r.ok())
    return r.error();
  std::stable_sort(s.events.begin(), s.events.end(), [](const auto& a, const auto& b) { return a.at_s < b.at_s; });
  return s;
}

caf::expected<scenario> load_scenario(const std::filesystem::path& file) {
  std::ifstream in{file};
  if (!in)
    return caf::make_error(caf::sec::invalid_argument, file.string() + ": cannot read the scenario file");
  std::ostringstream text;
  text << in.rdbuf();
  return parse_scenario(text.str(), file.string());
}

scenario scale_scenario(scenario s, double factor) {
  s.duration_s *= factor;
  for (auto& e : s.events)
    e.at_s *= factor;
  return s;
}

std::vector<std::string> check_scenario_nodes(const scenario& s, const std::vector<std::string>& node_ids) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.events.size(); ++i) {
    const auto& n = s.events[i].node;
    if (std::find(node_ids.begin(), node_ids.end(), n) == node_ids.end())
      out.push_back("event[" + std::to_string(i) + "].node " + quote_input(n) + " is not a node of the cluster" +
                    did_you_mean(n, node_ids));
  }
  return out;
}

} // namespace tessera::chaos
