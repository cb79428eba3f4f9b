// genscope HTML report: draws the report's charts with uPlot (inlined before this script) from
// the JSON in <script id="genscope-data"> (written by src/report/html_charts.cpp). The tables
// of the page are static HTML; this script only adds the charts. Steps are shaded through
// uPlot's drawClear hook and peaks are marked through its draw hook (uPlot's plugin API).
(function () {
  'use strict';
  var data = JSON.parse(document.getElementById('genscope-data').textContent);
  var palette = ['#1f77b4', '#d62728', '#2ca02c', '#ff7f0e', '#9467bd', '#8c564b', '#e377c2',
                 '#17becf', '#7f7f7f', '#bcbd22'];
  var runDash = [[], [8, 4], [2, 3], [12, 4, 2, 4]];  // run i is drawn with runDash[i % 4]
  var plots = [];

  // IEC binary units (KiB, MiB, GiB), as the page's tables print them.
  var byteUnits = ['B', 'KiB', 'MiB', 'GiB', 'TiB'];
  function formatBytes(v) {
    var units = byteUnits;
    var a = Math.abs(v), u = 0;
    while (a >= 1024 && u < 4) { a /= 1024; u++; }
    var digits = u === 0 ? 0 : a < 10 ? 2 : a < 100 ? 1 : 0;
    return (v < 0 ? '-' : '') + a.toFixed(digits) + ' ' + units[u];
  }
  function formatSeconds(v) {
    var a = Math.abs(v);
    if (a === 0) return '0 s';
    if (a < 1e-3) return (v * 1e6).toFixed(0) + ' µs';
    if (a < 1) return (v * 1e3).toFixed(a < 0.01 ? 2 : a < 0.1 ? 1 : 0) + ' ms';
    if (a < 60) return v.toFixed(a < 10 ? 2 : 1) + ' s';
    var whole = Math.round(a), rest = whole % 60;  // 59.6 s past a minute is the next minute
    return (v < 0 ? '-' : '') + Math.floor(whole / 60) + ' min' + (rest ? ' ' + rest + ' s' : '');
  }
  var formatters = {
    bytes: formatBytes,
    seconds: formatSeconds,
    percent: function (v) { return v.toFixed(1) + ' %'; },
    watts: function (v) { return v.toFixed(1) + ' W'; },
    celsius: function (v) { return v.toFixed(0) + ' °C'; },
    hertz: function (v) { return (v / 1e6).toFixed(0) + ' MHz'; },
    ms: function (v) { return v.toFixed(v < 10 ? 2 : 1) + ' ms'; },
    count: function (v) { return String(v); },
    iteration: function (v) { return Number.isInteger(v) ? '#' + v : ''; },
  };
  function formatter(unit) {
    var f = formatters[unit] || String;
    return function (v) { return v == null || !isFinite(v) ? '–' : f(v); };
  }
  // Axis labels with as many decimals as the step between them needs, so close values
  // (2.061 GiB, 2.062 GiB) do not print alike.
  function axisValues(unit, splits) {
    if (unit !== 'bytes') return splits.map(formatter(unit));
    var top = Math.max.apply(null, splits.map(Math.abs)), u = 0, div = 1;
    var units = byteUnits;
    while (top / div >= 1024 && u < 4) { div *= 1024; u++; }
    var step = splits.length > 1 ? Math.abs(splits[1] - splits[0]) / div : 1;
    var digits = u === 0 ? 0 : Math.min(3, Math.max(0, Math.ceil(-Math.log10(step) + 0.001)));
    return splits.map(function (v) { return v == null ? '' : (v / div).toFixed(digits) + ' ' + units[u]; });
  }
  // Byte axes step by 1, 2 or 5 times a power of 1024 (1 MiB, 2 MiB, 5 MiB, 10 MiB, ...).
  var byteIncrs = [];
  [1, 1024, 1048576, 1073741824, 1099511627776].forEach(function (base) {
    [1, 2, 5, 10, 20, 50, 100, 200, 500].forEach(function (m) { byteIncrs.push(m * base); });
  });
  function rgba(hex, alpha) {
    var n = parseInt(hex.slice(1), 16);
    return 'rgba(' + (n >> 16) + ',' + ((n >> 8) & 255) + ',' + (n & 255) + ',' + alpha + ')';
  }

  // Top-level steps as shaded bands, one labelled lane per run above the plot area (in the
  // top padding); peaks as diamonds in the colour of their series.
  function stepsPlugin(chart, colors) {
    var lane = 16;
    function clip(u, v) {
      var p = u.valToPos(v, 'x', true);
      return Math.min(Math.max(p, u.bbox.left), u.bbox.left + u.bbox.width);
    }
    return {
      hooks: {
        drawClear: [function (u) {
          var ctx = u.ctx, pr = uPlot.pxRatio;
          ctx.save();
          data.runs.forEach(function (run, r) {
            var color = palette[r % palette.length];
            var tops = run.steps.filter(function (s) { return s.depth === 0; });
            tops.forEach(function (s, i) {
              var x0 = clip(u, s.start), x1 = clip(u, s.end);
              if (x1 <= x0) return;
              // A label may run past its band up to the next band (or the plot's end); one
              // that still does not fit ends in an ellipsis instead of being cut mid-letter.
              var next = i + 1 < tops.length ? clip(u, tops[i + 1].start) : u.bbox.left + u.bbox.width;
              if (data.runs.length === 1) {
                ctx.fillStyle = i % 2 ? 'rgba(60,90,160,0.10)' : 'rgba(60,90,160,0.05)';
                ctx.fillRect(x0, u.bbox.top, x1 - x0, u.bbox.height);
              }
              var y = u.bbox.top - (data.runs.length - r) * lane * pr;
              ctx.fillStyle = rgba(color, i % 2 ? 0.30 : 0.18);
              ctx.fillRect(x0, y, x1 - x0, (lane - 2) * pr);
              if (s.status !== 'ok') {
                ctx.strokeStyle = '#c00';
                ctx.lineWidth = 2 * pr;
                ctx.strokeRect(x0, y, x1 - x0, (lane - 2) * pr);
              }
              ctx.fillStyle = '#222';
              ctx.font = (11 * pr) + 'px sans-serif';
              ctx.textBaseline = 'top';
              var room = Math.max(next, x1) - x0 - 5 * pr, text = s.name;
              if (ctx.measureText(text).width > room) {
                while (text.length > 0 && ctx.measureText(text + '…').width > room) text = text.slice(0, -1);
                text = text.length > 0 ? text + '…' : '';
              }
              if (text) ctx.fillText(text, x0 + 3 * pr, y + 2 * pr);
            });
          });
          ctx.restore();
        }],
        draw: [function (u) {
          var ctx = u.ctx, pr = uPlot.pxRatio, best = {};
          ctx.save();
          chart.peaks.forEach(function (p) {
            var s = u.series[p.series];
            if (!s || !s.show) return;
            var x = u.valToPos(p.x, 'x', true), y = u.valToPos(p.y, s.scale, true);
            if (x < u.bbox.left || x > u.bbox.left + u.bbox.width) return;
            if (p.time === 'span') {
              // No time known: a dashed line at the peak's height across its step.
              ctx.beginPath();
              ctx.moveTo(clip(u, p.span[0]), y); ctx.lineTo(clip(u, p.span[1]), y);
              ctx.setLineDash([4 * pr, 3 * pr]);
              ctx.strokeStyle = colors[p.series];
              ctx.lineWidth = 2 * pr;
              ctx.stroke();
              ctx.setLineDash([]);
            } else {
              var d = 5 * pr;
              ctx.beginPath();
              ctx.moveTo(x, y - d); ctx.lineTo(x + d, y); ctx.lineTo(x, y + d); ctx.lineTo(x - d, y);
              ctx.closePath();
              ctx.fillStyle = colors[p.series];
              ctx.strokeStyle = '#fff';
              ctx.lineWidth = pr;
              ctx.fill();
              ctx.stroke();
            }
            if (!best[p.series] || best[p.series].p.y < p.y) best[p.series] = {p: p, x: x, y: y};
          });
          // The highest peak of each series (the run's peak, as in the console and the table)
          // gets its value and step written next to it, and how its time is known.
          ctx.font = (11 * pr) + 'px sans-serif';
          ctx.textBaseline = 'bottom';
          var placed = [];  // label boxes already drawn: a label that would overlap moves down
          var drawn = [];   // what the labels say, also as data-peak-labels (for tools and tests)
          Object.keys(best).forEach(function (k) {
            if (!(best[k].p.y > 0)) return;  // a zero peak needs no label
            var b = best[k], when = {sampled: ', time sampled', span: ', time unknown'}[b.p.time] || '';
            var text = 'peak ' + formatter(chart.unit)(b.p.y) + ' (' + b.p.step + when + ')';
            var w = ctx.measureText(text).width, h = 14 * pr;
            var x = Math.min(b.x + 6 * pr, u.bbox.left + u.bbox.width - w);
            var y = Math.max(b.y - 16 * pr, u.bbox.top);
            for (var i = 0; i < placed.length; i++) {
              var o = placed[i];
              if (x < o.x + o.w && o.x < x + w && y < o.y + h && o.y < y + h) { y = o.y + h + pr; i = -1; }
            }
            placed.push({x: x, y: y, w: w});
            ctx.fillStyle = 'rgba(255,255,255,0.8)';
            ctx.fillRect(x - 2, y, w + 4, h);
            ctx.fillStyle = colors[b.p.series];
            ctx.fillText(text, x, y + 13 * pr);
            drawn.push({series: b.p.series, value: b.p.y, step: b.p.step, time: b.p.time, text: text});
          });
          u.root.setAttribute('data-peak-labels', JSON.stringify(drawn));
          ctx.restore();
        }],
      },
    };
  }

  function buildChart(chart) {
    var el = document.getElementById('chart-' + chart.id);
    var tables = chart.tables.map(function (t) {
      return [t.x].concat(t.series.map(function (s) { return s.values; }));
    });
    // uPlot.join aligns the runs on one x axis: a run's own missing samples stay null (gaps),
    // alignment artifacts are undefined (spanned).
    var aligned = tables.length === 1 ? tables[0] : uPlot.join(tables);
    var format = formatter(chart.unit), formatX = formatter(chart.x_unit);
    var series = [{label: chart.x_label, value: function (u, v) { return formatX(v); }}];
    var colors = [null];
    chart.tables.forEach(function (t) {
      t.series.forEach(function (s) {
        colors.push(palette[s.color % palette.length]);
        series.push({
          label: s.label, scale: s.scale, stroke: colors[colors.length - 1],
          dash: runDash[t.run % runDash.length], width: 1.5, spanGaps: false,
          points: {show: !!chart.points}, value: function (u, v) { return format(v); },
        });
      });
    });
    var scales = {x: {time: false}};
    if (chart.x_range) {
      // The whole run (from 0 to its end) when showing all data; the zoomed span otherwise.
      var first = aligned[0][0], last = aligned[0][aligned[0].length - 1];
      scales.x.range = function (u, min, max) {
        return min <= first && max >= last ? [Math.min(chart.x_range[0], min), Math.max(chart.x_range[1], max)] : [min, max];
      };
    }
    var axes = [{values: function (u, splits) { return splits.map(formatX); }}];
    if (chart.x_unit === 'seconds') {
      // Time ticks at round seconds and minutes ("5 min 0 s", not 250 s), spaced for labels
      // that wide: uPlot's default 1-2-5 steps and 50 px overlapped them on runs of minutes.
      axes[0].space = 80;
      axes[0].incrs = [1e-3, 2e-3, 5e-3, 0.01, 0.02, 0.05, 0.1, 0.2, 0.5, 1, 2, 5, 10, 15, 30,
                       60, 120, 300, 600, 900, 1800, 3600, 7200, 14400, 28800, 86400];
    }
    // Exact peaks can lie above every sample: the y range includes them, so no marker is cut.
    var peakMax = {}, peakMin = {};
    chart.peaks.forEach(function (p) {
      var scale = series[p.series] && series[p.series].scale;
      if (scale && !(peakMax[scale] >= p.y)) peakMax[scale] = p.y;
      if (scale && !(peakMin[scale] <= p.y)) peakMin[scale] = p.y;
    });
    chart.axes.forEach(function (a, i) {
      var top = peakMax[a.scale], bottom = peakMin[a.scale];
      scales[a.scale] = {range: function (u, min, max) {
        if (top != null && (max == null || top > max)) max = top;
        if (bottom != null && (min == null || bottom < min)) min = bottom;
        if (min == null || max == null) return [0, 1];
        if (a.from_zero) return [0, max > 0 ? max * 1.08 : 1];
        var pad = (max - min) * 0.05 || Math.abs(max) * 0.01 || 1;
        return [min - pad, max + pad];
      }};
      axes.push({scale: a.scale, side: i === 0 ? 3 : 1, label: a.label, size: 78,
                 incrs: chart.unit === 'bytes' ? byteIncrs : undefined,
                 grid: {show: i === 0}, values: function (u, splits) { return axisValues(chart.unit, splits); }});
    });
    var opts = {
      width: Math.max(el.clientWidth, 320), height: chart.height, series: series, axes: axes,
      scales: scales, cursor: {drag: {x: true, y: false}},
      plugins: chart.bands ? [stepsPlugin(chart, colors)] : [],
      padding: [chart.bands ? 4 + 16 * data.runs.length : 8, 8, 0, 0],
    };
    plots.push(new uPlot(opts, aligned, el));
  }

  data.charts.forEach(buildChart);
  window.addEventListener('resize', function () {
    plots.forEach(function (p) {
      p.setSize({width: Math.max(p.root.parentNode.clientWidth, 320), height: p.height});
    });
  });
  window.genscopePlots = plots;
  document.documentElement.setAttribute('data-charts-drawn', String(plots.length));
})();
