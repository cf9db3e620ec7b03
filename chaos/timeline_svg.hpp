#pragma once
/// @file
/// The SVG timeline of a chaos run: one bar per request from its send to
/// its end, colored by outcome (lost ones run to the end of the chart),
/// the frontend's health as a strip above them, and each event as a
/// labelled vertical line. Standalone SVG, no dependencies. Pure.

#include <string>

#include "chaos/chaos_report.hpp"

namespace tessera::chaos {

/// Renders `r` (after finish_report) as a standalone SVG document.
[[nodiscard]] std::string render_timeline_svg(const chaos_report& r);

} // namespace tessera::chaos
