// What HTML reports inline, embedded at build time by cmake/embed_assets.cmake: the chart
// library uPlot (MIT; vendored in third_party/uplot from the npm registry) and the report's
// own script and stylesheet (src/report/html_report.js, html_report.css).
#pragma once

#include <string_view>

namespace genscope::detail {

/// uPlot's minified browser build (dist/uPlot.iife.min.js), defines the global `uPlot`.
std::string_view uplot_js() noexcept;
/// uPlot's stylesheet (dist/uPlot.min.css).
std::string_view uplot_css() noexcept;
/// uPlot's MIT licence text, reproduced in every report that inlines the library.
std::string_view uplot_license() noexcept;
/// The report's chart script (html_report.js): draws the charts from the page's JSON data.
std::string_view report_js() noexcept;
/// The report's stylesheet (html_report.css).
std::string_view report_css() noexcept;

}  // namespace genscope::detail
