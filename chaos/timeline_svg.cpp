#include "chaos/timeline_svg.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>

namespace tessera::chaos {

namespace {

const char* outcome_color(request_outcome o) {
  switch (o) {
    case request_outcome::ok:
      return "#2ca02c";
    case request_outcome::wrong:
      return "#d62728";
    case request_outcome::failed:
      return "#ff7f0e";
    case request_outcome::lost:
      return "#555555";
  }
  return "#000000";
}

const char* health_color(const health_sample& h) {
  if (h.http_status == 200)
    return "#98df8a";
  return h.http_status == 0 ? "#bbbbbb" : "#ff9896";
}

std::string escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    switch (c) {
      case '<':
        out += "&lt;";
        break;
      case '>':
        out += "&gt;";
        break;
      case '&':
        out += "&amp;";
        break;
      case '"':
        out += "&quot;";
        break;
      default:
        out += c;
    }
  }
  return out;
}

/// A round tick step giving about 10 ticks over `span`.
double tick_step(double span) {
  const double raw = span / 10;
  const double mag = std::pow(10.0, std::floor(std::log10(raw)));
  for (double m : {1.0, 2.0, 5.0, 10.0})
    if (raw <= m * mag)
      return m * mag;
  return 10 * mag;
}

} // namespace

std::string render_timeline_svg(const chaos_report& r) {
  const double left = 60, right = 20, top = 50, strip = 16, gap = 28, bottom = 60;
  const double width = 1000;
  const double plot_w = width - left - right;
  const size_t n = r.requests.size();
  const double row = n == 0 ? 4.0 : std::clamp(500.0 / static_cast<double>(n), 1.5, 8.0);
  const double rows_h = std::max(40.0, row * static_cast<double>(n));
  const double height = top + strip + gap + rows_h + bottom;
  double t_end = std::max(r.duration_s + r.grace_s, 1.0);
  for (const auto& q : r.requests)
    t_end = std::max(t_end, q.end_s);
  auto x = [&](double t) { return left + plot_w * std::clamp(t, 0.0, t_end) / t_end; };
  const double rows_top = top + strip + gap;

  std::string s;
  char buf[4096];
  std::snprintf(buf, sizeof buf,
                "<svg xmlns=\"http://www.w3.org/2000/svg\" width=\"%.0f\" height=\"%.0f\" font-family=\"sans-serif\" "
                "font-size=\"11\">\n<rect width=\"100%%\" height=\"100%%\" fill=\"white\"/>\n",
                width, height);
  s += buf;
  const auto& t = r.totals;
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"18\" font-size=\"14\">chaos: %s  (sent %zu, ok %zu, failed %zu, wrong %zu, "
                "lost %zu)</text>\n",
                left, escape(r.scenario.substr(0, 200)).c_str(), t.sent, t.ok, t.failed, t.wrong, t.lost);
  s += buf;
  // Legend.
  double lx = left;
  for (auto o : {request_outcome::ok, request_outcome::failed, request_outcome::wrong, request_outcome::lost}) {
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.0f\" y=\"28\" width=\"10\" height=\"10\" fill=\"%s\"/>"
                  "<text x=\"%.0f\" y=\"37\">%s</text>\n",
                  lx, outcome_color(o), lx + 14, to_string(o));
    s += buf;
    lx += 70;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"37\">health strip: green 200, red other status, grey no answer</text>\n",
                lx + 10);
  s += buf;
  // Health strip: each sample's state until the next one.
  std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%.0f\">%s</text>\n", top + 12,
                escape(r.health_path.empty() ? "health" : r.health_path).c_str());
  s += buf;
  for (size_t i = 0; i < r.health.size(); ++i) {
    const double a = r.health[i].t_s;
    const double b = i + 1 < r.health.size() ? r.health[i + 1].t_s : t_end;
    if (b <= 0)
      continue;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%.0f\" width=\"%.1f\" height=\"%.0f\" fill=\"%s\"/>\n", x(a), top,
                  std::max(x(b) - x(a), 0.5), strip, health_color(r.health[i]));
    s += buf;
  }
  // Requests, one row each in send order.
  std::snprintf(buf, sizeof buf, "<text x=\"4\" y=\"%.0f\">requests</text>\n", rows_top + 10);
  s += buf;
  for (size_t i = 0; i < n; ++i) {
    const auto& q = r.requests[i];
    const double end = q.end_s >= 0 ? q.end_s : t_end;
    std::snprintf(buf, sizeof buf,
                  "<rect x=\"%.1f\" y=\"%.1f\" width=\"%.1f\" height=\"%.1f\" fill=\"%s\"><title>#%zu %s %.2f-%.2f s"
                  "</title></rect>\n",
                  x(q.send_s), rows_top + row * static_cast<double>(i), std::max(x(end) - x(q.send_s), 1.0),
                  std::max(row - 0.5, 1.0), outcome_color(q.outcome), q.index, to_string(q.outcome), q.send_s, end);
    s += buf;
  }
  // Axis.
  const double axis_y = rows_top + rows_h + 8;
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.0f\" y1=\"%.0f\" x2=\"%.0f\" y2=\"%.0f\" stroke=\"black\"/>\n", left, axis_y,
                left + plot_w, axis_y);
  s += buf;
  const double step = tick_step(t_end);
  for (double v = 0; v <= t_end + 1e-9; v += step) {
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"black\"/><text x=\"%.1f\" y=\"%.0f\" "
                  "text-anchor=\"middle\">%g</text>\n",
                  x(v), axis_y, x(v), axis_y + 5, x(v), axis_y + 18, v);
    s += buf;
  }
  std::snprintf(buf, sizeof buf,
                "<text x=\"%.0f\" y=\"%.0f\" text-anchor=\"middle\">seconds since the load started</text>\n",
                left + plot_w / 2, axis_y + 36);
  s += buf;
  // End of the load.
  std::snprintf(buf, sizeof buf,
                "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#999\" stroke-dasharray=\"2,3\"/>\n",
                x(r.duration_s), top, x(r.duration_s), axis_y);
  s += buf;
  // Events; those of one action within 0.2 s of each other (a plan set on
  // every node) share one line and label.
  for (size_t i = 0, label = 0; i < r.events.size(); ++label) {
    const auto& e = r.events[i];
    std::string nodes = e.event.node;
    size_t j = i + 1;
    for (; j < r.events.size() && r.events[j].event.action == e.event.action &&
           r.events[j].event.plan.empty() == e.event.plan.empty() && r.events[j].applied_s - e.applied_s < 0.2;
         ++j)
      nodes += ", " + r.events[j].event.node;
    const double ex = x(e.applied_s);
    const bool heal = e.event.action == event_action::faults && e.event.plan.empty();
    const std::string label_text = (heal ? std::string{"heal"} : std::string{to_string(e.event.action)}) + " " + nodes;
    std::snprintf(buf, sizeof buf,
                  "<line x1=\"%.1f\" y1=\"%.0f\" x2=\"%.1f\" y2=\"%.0f\" stroke=\"#1f77b4\" stroke-width=\"1.5\" "
                  "stroke-dasharray=\"6,3\"><title>%s</title></line>\n"
                  "<text x=\"%.1f\" y=\"%.0f\" fill=\"#1f77b4\">%s</text>\n",
                  ex, top - 4, ex, axis_y, escape((label_text + " " + e.event.plan).substr(0, 400)).c_str(), ex + 3,
                  rows_top - 6 - 10.0 * static_cast<double>(label % 2), escape(label_text.substr(0, 200)).c_str());
    s += buf;
    i = j;
  }
  s += "</svg>\n";
  return s;
}

} // namespace tessera::chaos
