/* dfd web — admin dashboard: /admin/stats every 3 s with a live SVG chart, and a paged table of /admin/hashes. */
(function () {
  "use strict";

  var D = window.DFD;
  var STATS_INTERVAL_MS = 3000;
  var WINDOW_MS = 3 * 60 * 1000; // the chart shows the last 3 minutes...
  var MIN_WINDOW_MS = 15 * 1000; // ...or, for a page opened less than that ago, the time since then (at least 15 s)
  var GAP_MS = 2.5 * STATS_INTERVAL_MS; // no sample for longer than this: the lines break and the gap is shaded
  var SVG_NS = "http://www.w3.org/2000/svg";

  var STAT_FIELDS = [
    { key: "total_files", kind: "count" },
    { key: "total_uploads", kind: "count" },
    { key: "duplicates_avoided", kind: "count" },
    { key: "total_bytes_stored", kind: "bytes" },
    { key: "total_s3_size_saved", kind: "bytes" },
    { key: "deleted_uploads", kind: "count" }, // processed uploads deleted by their owners
  ];

  // Line styles, in drawing order: each later line is thinner and dashed, so equal series stay distinguishable
  // (the line below shows through the gaps of the one on top). The marker shape is drawn at the latest point.
  var STYLES = [
    { width: 3.5, dash: "", marker: "circle" },
    { width: 2.5, dash: "8 5", marker: "square" },
    { width: 2.5, dash: "1 5", marker: "diamond" },
  ];
  var RATIO_STYLE = { width: 2, dash: "12 4 3 4", marker: "triangle" };

  var CHARTS = {
    counts: {
      format: D.formatNumber,
      series: [
        { key: "total_uploads", label: "Uploads", color: "#0b57d0" },
        { key: "total_files", label: "Files stored", color: "#146c2e" },
        { key: "duplicates_avoided", label: "Duplicates avoided", color: "#a8460b" },
      ],
      ratio: { key: "dedup_ratio", label: "Dedup ratio, of uploads", color: "#7b1fa2" },
    },
    bytes: {
      format: D.formatBytes,
      series: [
        { key: "total_bytes_stored", label: "Bytes stored", color: "#0b57d0" },
        { key: "total_s3_size_saved", label: "Bytes saved", color: "#a8460b" },
      ],
      ratio: { key: "bytes_saved_ratio", label: "Saved, of all bytes", color: "#7b1fa2" },
    },
  };

  var COLUMNS = ["File name", "SHA-256", "Size", "Type", "First stored", "Uploads"];

  var samples = [];
  var chartStart = Date.now();
  var statsTimer = null;
  var statsGeneration = 0;
  var lastStatsError = "";
  var forbidden = false; // the API answered 403 to /admin/*: nothing is polled until someone else signs in

  var table = {
    pageSize: 25,
    token: null, // last_evaluated_key that produced the current page (null = first page)
    stack: [], // tokens of the previous pages, for "Previous"
    pageNo: 1,
    nextToken: null,
    request: 0,
    loading: false, // a load the user asked for (pager, page size, Refresh) is in flight
    announce: false, // announce the pager status once the current load ends (the user paged)
    loaded: false, // the current page has been shown at least once
    failed: false, // the last load failed: the next successful stats poll loads the page again
  };

  function $(id) {
    return document.getElementById(id);
  }

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      if (attrs[k] !== "" && attrs[k] !== null && attrs[k] !== undefined) node.setAttribute(k, String(attrs[k]));
    });
    return node;
  }

  function setText(node, text) {
    if (node.textContent !== text) node.textContent = text;
  }

  // ---------------------------------------------------------------- stats

  function num(v) {
    var n = Number(v);
    return isFinite(n) ? n : 0;
  }

  /** A chart sample from an /admin/stats answer: the counters, plus the two ratios (null while undefined). */
  function toSample(s) {
    var sample = { t: Date.now() };
    STAT_FIELDS.forEach(function (f) {
      sample[f.key] = num(s[f.key]);
    });
    var saved = sample.total_s3_size_saved;
    var all = sample.total_bytes_stored + saved;
    sample.dedup_ratio = sample.total_uploads > 0 ? num(s.dedup_ratio) : null; // duplicates ÷ uploads, from the API
    sample.bytes_saved_ratio = all > 0 ? saved / all : null;
    return sample;
  }

  function renderStats(s) {
    STAT_FIELDS.forEach(function (f) {
      var node = $("stat-" + f.key);
      var value = s[f.key];
      node.setAttribute("data-value", String(value));
      if (f.kind === "bytes") {
        node.textContent = D.formatBytes(value);
        node.title = D.formatNumber(value) + " bytes";
      } else {
        node.textContent = D.formatNumber(value);
      }
    });
    var ratioEl = $("stat-dedup_ratio");
    ratioEl.textContent = s.dedup_ratio !== null ? D.formatPercent(s.dedup_ratio) : "—";
    ratioEl.setAttribute("data-value", s.dedup_ratio !== null ? String(s.dedup_ratio) : "");
    ratioEl.title =
      D.formatNumber(s.duplicates_avoided) + " of " + D.formatNumber(s.total_uploads) + " uploads were duplicates";
    var bytesEl = $("stat-bytes_saved_ratio");
    bytesEl.textContent = s.bytes_saved_ratio !== null ? D.formatPercent(s.bytes_saved_ratio) : "—";
    bytesEl.setAttribute("data-value", s.bytes_saved_ratio !== null ? String(s.bytes_saved_ratio) : "");
  }

  function fetchStats() {
    var generation = statsGeneration;
    return D.apiFetch("GET", "/admin/stats").then(
      function (res) {
        if (generation !== statsGeneration) return;
        var sample = toSample(res.body || {});
        var prev = samples[samples.length - 1]; // the previous answer (pruning always keeps the latest)
        renderStats(sample);
        samples.push(sample);
        pruneSamples();
        renderChart();
        $("stats-updated").textContent = "Updated " + D.formatDate(Date.now());
        if (lastStatsError) {
          lastStatsError = "";
          $("stats-error").hidden = true;
          D.announce("Statistics are available again.");
        }
        if (table.failed || !table.loaded) {
          // The API answers again (or the first load never finished): load the page that failed.
          if (!table.loading) loadPage({ quiet: table.loaded });
        } else if (
          prev &&
          (sample.total_files !== prev.total_files || sample.total_uploads !== prev.total_uploads) &&
          table.stack.length === 0
        ) {
          // A new file or a duplicate upload: refresh the first page in the background, so new rows and upload
          // counts show without a click. Also while a load is in flight (it may predate the change): loadPage()
          // supersedes it, so the change is not lost.
          loadPage({ quiet: true });
        }
      },
      function (err) {
        if (generation !== statsGeneration) return;
        if (refused(err)) return;
        var msg = "Could not load statistics: " + D.describeError(err);
        $("stats-updated").textContent = "Last attempt " + D.formatDate(Date.now()) + " failed; retrying every 3 s";
        if (msg !== lastStatsError) {
          lastStatsError = msg;
          var box = $("stats-error");
          box.textContent = msg;
          box.hidden = false;
        }
        renderChart(); // the time axis moves on: the outage shows as a gap
      }
    );
  }

  function statsLoop() {
    window.clearTimeout(statsTimer);
    var generation = statsGeneration;
    fetchStats().finally(function () {
      if (generation === statsGeneration) statsTimer = window.setTimeout(statsLoop, STATS_INTERVAL_MS);
    });
  }

  function pruneSamples() {
    var oldest = Date.now() - WINDOW_MS - GAP_MS;
    while (samples.length && samples[0].t < oldest) samples.shift();
  }

  // ---------------------------------------------------------------- chart

  function niceMax(v) {
    if (v <= 0) return 1;
    var p = Math.pow(10, Math.floor(Math.log10(v)));
    var steps = [1, 2, 2.5, 5, 10];
    for (var i = 0; i < steps.length; i++) if (steps[i] * p >= v) return steps[i] * p;
    return 10 * p;
  }

  function niceMaxBytes(v) {
    if (v <= 0) return 1024;
    var p = Math.pow(1024, Math.floor(Math.log(v) / Math.log(1024)));
    return niceMax(v / p) * p;
  }

  function formatSpan(ms) {
    var s = Math.round(ms / 1000);
    return s < 90 ? s + " s" : String(Math.round(s / 30) / 2) + " min";
  }

  function marker(shape, x, y, color, size) {
    var r = size || 4;
    if (shape === "square") return svg("rect", { x: x - r, y: y - r, width: 2 * r, height: 2 * r, fill: color });
    if (shape === "diamond") {
      return svg("polygon", {
        points: [x, y - r - 1, x + r + 1, y, x, y + r + 1, x - r - 1, y].join(" "),
        fill: color,
      });
    }
    if (shape === "triangle") {
      return svg("polygon", { points: [x, y - r - 1, x + r + 1, y + r, x - r - 1, y + r].join(" "), fill: color });
    }
    return svg("circle", { cx: x, cy: y, r: r, fill: color });
  }

  /** A series as a path that breaks where a value is missing or samples are more than GAP_MS apart. */
  function seriesPath(key, px, py) {
    var d = [];
    var lonely = []; // samples with no neighbour in their segment: drawn as markers, a line would be invisible
    var prev = null;
    var segment = [];
    function flush() {
      if (segment.length === 1) lonely.push(segment[0]);
      segment = [];
    }
    samples.forEach(function (s) {
      var v = s[key];
      if (v === null || v === undefined) {
        flush();
        prev = null;
        return;
      }
      var start = prev === null || s.t - prev.t > GAP_MS;
      if (start) flush();
      var x = px(s.t);
      var y = py(v);
      d.push((start ? "M" : "L") + x.toFixed(1) + "," + y.toFixed(1));
      segment.push(s);
      prev = s;
    });
    flush();
    return { d: d.join(" "), lonely: lonely };
  }

  function legendSwatch(color, style) {
    var sw = svg("svg", { class: "swatch", viewBox: "0 0 30 12", width: 30, height: 12, "aria-hidden": "true" });
    sw.appendChild(
      svg("line", {
        x1: 1, x2: 29, y1: 6, y2: 6, stroke: color, "stroke-width": Math.min(style.width, 3),
        "stroke-dasharray": style.dash, "stroke-linecap": style.dash === "1 5" ? "round" : "butt",
      })
    );
    sw.appendChild(marker(style.marker, 15, 6, color, 3.5));
    return sw;
  }

  function renderChart() {
    var metric = $("chart-metric").value;
    var cfg = CHARTS[metric] || CHARTS.counts;
    var chart = $("stats-chart");
    // The viewBox follows the rendered width, so text and strokes keep their pixel size on any screen.
    var W = Math.max(280, Math.round(chart.getBoundingClientRect().width) || 900);
    var H = W < 520 ? 180 : 220;
    chart.setAttribute("viewBox", "0 0 " + W + " " + H);
    var L = 64;
    var R = 50; // room for the ratio's 0–100 % axis
    var T = 12;
    var B = 24;
    var pw = W - L - R;
    var ph = H - T - B;
    var now = Date.now();
    var span = Math.min(WINDOW_MS, Math.max(MIN_WINDOW_MS, now - chartStart));

    // Keep <title>/<desc>, redraw everything else.
    Array.prototype.slice.call(chart.childNodes).forEach(function (n) {
      if (n.nodeName !== "title" && n.nodeName !== "desc") chart.removeChild(n);
    });
    chart.setAttribute("data-points", String(samples.length));

    var maxVal = 0;
    samples.forEach(function (s) {
      cfg.series.forEach(function (ser) {
        maxVal = Math.max(maxVal, s[ser.key]);
      });
    });
    var yMax = metric === "bytes" ? niceMaxBytes(maxVal) : niceMax(maxVal);

    // Not clamped: what is older than the window lies left of the plot, and the clip cuts it off at the axis.
    function px(t) {
      return L + (1 - (now - t) / span) * pw;
    }
    function py(v) {
      return T + ph - (v / yMax) * ph;
    }
    function pyRatio(v) {
      return T + ph - v * ph;
    }

    // The plot keeps the sample just before the window, so the lines run to the left axis; the clip ends them
    // there. Only the left side is clipped, so markers at the top, bottom and right (now) edge are whole.
    var defs = svg("defs");
    var clip = svg("clipPath", { id: "chart-plot-clip" });
    clip.appendChild(svg("rect", { x: L, y: 0, width: W - L, height: H }));
    defs.appendChild(clip);
    chart.appendChild(defs);
    var clipped = "url(#chart-plot-clip)";

    // Gaps (an outage, a sleeping laptop): shaded, including a gap that is still going on.
    var gaps = svg("g", { class: "chart-gaps", "aria-hidden": "true", "clip-path": clipped });
    var times = [Math.max(chartStart, now - span)].concat(
      samples.map(function (s) {
        return s.t;
      }),
      [now]
    );
    for (var i = 1; i < times.length; i++) {
      if (times[i] - times[i - 1] > GAP_MS) {
        var x1 = px(times[i - 1]);
        gaps.appendChild(svg("rect", { x: x1, y: T, width: Math.max(1, px(times[i]) - x1), height: ph }));
      }
    }
    chart.appendChild(gaps);

    var grid = svg("g", { class: "chart-grid", "aria-hidden": "true" });
    [0, 0.5, 1].forEach(function (f) {
      var y = T + ph - f * ph;
      grid.appendChild(svg("line", { x1: L, x2: W - R, y1: y, y2: y }));
      var label = svg("text", { x: L - 6, y: y + 4, "text-anchor": "end" });
      label.textContent = cfg.format(yMax * f);
      grid.appendChild(label);
      var right = svg("text", { x: W - 4, y: y + 4, "text-anchor": "end", class: "ratio-axis" });
      right.textContent = Math.round(f * 100) + " %";
      grid.appendChild(right);
    });
    var left = svg("text", { x: L, y: H - 6, "text-anchor": "start" });
    left.textContent = formatSpan(span) + " ago";
    var nowLabel = svg("text", { x: W - R, y: H - 6, "text-anchor": "end" });
    nowLabel.textContent = "now";
    grid.appendChild(left);
    grid.appendChild(nowLabel);
    chart.appendChild(grid);

    var drawn = cfg.series.map(function (ser, idx) {
      return { ser: ser, style: STYLES[idx % STYLES.length], y: py };
    });
    drawn.push({ ser: cfg.ratio, style: RATIO_STYLE, y: pyRatio });
    var last = samples[samples.length - 1];
    var plot = svg("g", { "clip-path": clipped });
    chart.appendChild(plot);
    drawn.forEach(function (item) {
      var ser = item.ser;
      var style = item.style;
      var path = seriesPath(ser.key, px, item.y);
      if (path.d) {
        plot.appendChild(
          svg("path", {
            d: path.d,
            fill: "none",
            stroke: ser.color,
            "stroke-width": style.width,
            "stroke-dasharray": style.dash,
            "stroke-linejoin": "round",
            "stroke-linecap": style.dash === "1 5" ? "round" : "butt",
            "vector-effect": "non-scaling-stroke",
            "data-series": ser.key,
          })
        );
      }
      path.lonely.forEach(function (s) {
        if (s !== last) plot.appendChild(marker(style.marker, px(s.t), item.y(s[ser.key]), ser.color, 3));
      });
      if (last && last[ser.key] !== null && last[ser.key] !== undefined) {
        plot.appendChild(marker(style.marker, px(last.t), item.y(last[ser.key]), ser.color));
      }
    });

    var legend = $("chart-legend");
    legend.textContent = "";
    var desc = [];
    drawn.forEach(function (item) {
      var ser = item.ser;
      var isRatio = ser === cfg.ratio;
      var v = last ? last[ser.key] : null;
      var value = v === null || v === undefined ? "—" : isRatio ? D.formatPercent(v) : cfg.format(v);
      var li = document.createElement("li");
      li.appendChild(legendSwatch(ser.color, item.style));
      li.appendChild(document.createTextNode(ser.label + (isRatio ? " (right axis)" : "") + ": " + value));
      legend.appendChild(li);
      desc.push(ser.label + " " + value);
    });
    var stale = last && now - last.t > GAP_MS ? " No new sample for " + Math.round((now - last.t) / 1000) + " s." : "";
    $("chart-desc").textContent = samples.length
      ? "Last " + formatSpan(span) + ", " + samples.length + " samples. Latest: " +
        desc.join(", ") + "." + stale
      : "No samples yet.";
  }

  // ---------------------------------------------------------------- table

  function cell(className, label) {
    var td = document.createElement("td");
    td.setAttribute("role", "cell");
    if (className) td.className = className;
    if (label) td.setAttribute("data-label", label);
    return td;
  }

  function copyHash(hash, button, code, label) {
    var text = button.querySelector(".copy-text");
    function done(ok) {
      window.clearTimeout(button._copyTimer);
      if (ok) {
        text.textContent = "Copied";
        D.announce("SHA-256 of " + label + " copied.");
      } else {
        // No clipboard (e.g. a plain-http page): show the whole hash, selected, to copy by hand.
        code.classList.add("hash-expanded");
        selectNode(code);
        text.textContent = "Copy";
        D.announce("Could not copy. The SHA-256 is shown in full and selected: " + hash);
        return;
      }
      button._copyTimer = window.setTimeout(function () {
        text.textContent = "Copy";
      }, 2000);
    }
    function selectNode(node) {
      var range = document.createRange();
      range.selectNodeContents(node);
      var sel = window.getSelection();
      sel.removeAllRanges();
      sel.addRange(range);
      return sel;
    }
    function legacy() {
      var ok = false;
      var sel = selectNode(code);
      try {
        ok = document.execCommand("copy");
      } catch (e) {
        ok = false;
      }
      if (ok) sel.removeAllRanges();
      done(ok);
    }
    if (navigator.clipboard && window.isSecureContext) {
      navigator.clipboard.writeText(hash).then(
        function () {
          done(true);
        },
        legacy
      );
    } else {
      legacy();
    }
  }

  function buildRow(it) {
    var hash = it.hash || "";
    var label = it.filename || hash;
    var tr = document.createElement("tr");
    tr.setAttribute("role", "row");
    tr.setAttribute("data-testid", "hash-row");
    tr.setAttribute("data-hash", hash);

    var nameTd = cell("col-name", COLUMNS[0]);
    var name = document.createElement("span");
    name.className = "name-text";
    nameTd.appendChild(name);
    tr.appendChild(nameTd);

    var hashTd = cell("col-hash", COLUMNS[1]);
    var wrap = document.createElement("span");
    wrap.className = "hash-cell";
    var code = document.createElement("code");
    code.className = "hash-short";
    code.setAttribute("data-testid", "hash-value");
    code.textContent = hash;
    code.title = hash;
    var copy = document.createElement("button");
    copy.type = "button";
    copy.className = "btn btn-small btn-secondary btn-copy";
    copy.setAttribute("data-testid", "hash-copy");
    var copyText = document.createElement("span");
    copyText.className = "copy-text";
    copyText.textContent = "Copy";
    copy.appendChild(copyText);
    var copyHidden = document.createElement("span");
    copyHidden.className = "visually-hidden";
    copyHidden.textContent = " SHA-256 of " + label;
    copy.appendChild(copyHidden);
    copy.addEventListener("click", function () {
      copyHash(hash, copy, code, label);
    });
    wrap.appendChild(code);
    wrap.appendChild(copy);
    hashTd.appendChild(wrap);
    tr.appendChild(hashTd);

    tr.appendChild(cell("num col-size", COLUMNS[2]));
    tr.appendChild(cell("col-type", COLUMNS[3]));
    tr.appendChild(cell("col-date", COLUMNS[4]));
    tr.appendChild(cell("num col-uploads", COLUMNS[5]));

    var actTd = cell("col-actions");
    var btn = document.createElement("button");
    btn.type = "button";
    btn.className = "btn btn-small";
    btn.setAttribute("data-testid", "hash-download");
    btn.textContent = "Download";
    var hidden = document.createElement("span");
    hidden.className = "visually-hidden";
    hidden.textContent = " " + label;
    btn.appendChild(hidden);
    var status = document.createElement("span");
    status.className = "download-fallback";
    btn.addEventListener("click", function () {
      D.downloadFile(hash, btn, status);
    });
    actTd.appendChild(btn);
    actTd.appendChild(status);
    tr.appendChild(actTd);
    return tr;
  }

  /** Writes an item's values into its row, touching only what changed (the row's controls are kept). */
  function fillRow(tr, it) {
    var c = tr.children;
    var name = c[0].firstChild;
    setText(name, it.filename || "(unnamed)");
    name.title = it.filename || "";

    setText(c[2], D.formatBytes(it.size));
    c[2].title = D.formatNumber(it.size) + " bytes";
    c[2].setAttribute("data-value", String(it.size));

    setText(c[3], it.content_type || "—");

    var d = D.parseDate(it.created_at);
    var date = c[4];
    if (d) {
      var time = date.firstChild;
      if (!time || time.nodeName !== "TIME") {
        date.textContent = "";
        time = document.createElement("time");
        date.appendChild(time);
      }
      time.dateTime = d.toISOString();
      setText(time, D.formatDate(it.created_at));
    } else {
      setText(date, it.created_at ? String(it.created_at) : "—");
    }

    setText(c[5], it.upload_count !== undefined ? D.formatNumber(it.upload_count) : "—");
  }

  function focusTarget(node) {
    var row = node.closest ? node.closest("tr") : null;
    var body = $("hashes-body");
    return {
      node: node,
      hash: row ? row.getAttribute("data-hash") : null,
      testid: node.getAttribute ? node.getAttribute("data-testid") : null,
      index: row ? Array.prototype.indexOf.call(body.children, row) : -1,
    };
  }

  /** After a re-render, put focus back where it was: the same control, else the same control of the same row
   * (by hash), else that control in the row now at the same position, else the table's scroll region. */
  function restoreFocus(before) {
    var body = $("hashes-body");
    var now = document.activeElement;
    if (before.node.isConnected && now === before.node) return;
    if (now && now !== document.body && now !== document.documentElement && !body.contains(now)) return;
    var target = null;
    if (before.node.isConnected && body.contains(before.node)) target = before.node;
    var sel = before.testid ? '[data-testid="' + before.testid + '"]' : "button";
    if (!target && before.hash !== null) {
      var row = body.querySelector('tr[data-hash="' + CSS.escape(before.hash) + '"]');
      if (row) target = row.querySelector(sel);
    }
    if (!target && before.index >= 0) {
      var rows = body.children;
      var same = rows[Math.min(before.index, rows.length - 1)];
      if (same) target = same.querySelector(sel);
    }
    if (!target) target = document.querySelector(".table-wrap");
    if (target) target.focus({ preventScroll: true });
  }

  function placeRow(body, tr, before) {
    // moveBefore() keeps focus and state of a node already in the document; insertBefore() would blur it.
    if (tr.parentNode === body && typeof body.moveBefore === "function") {
      try {
        body.moveBefore(tr, before);
        return;
      } catch (e) {
        /* fall through */
      }
    }
    body.insertBefore(tr, before);
  }

  /** Shows items, reusing the rows of hashes already shown, so a refresh does not throw keyboard focus away. */
  function renderRows(items) {
    var body = $("hashes-body");
    var active = document.activeElement;
    var before = active && body.contains(active) ? focusTarget(active) : null;

    var existing = {};
    Array.prototype.forEach.call(body.children, function (tr) {
      var h = tr.getAttribute("data-hash");
      if (h !== null) existing[h] = tr;
    });
    var wanted = [];
    if (!items.length) {
      var empty = document.createElement("tr");
      empty.setAttribute("role", "row");
      var td = cell("empty");
      td.colSpan = 7;
      td.textContent = table.pageNo === 1 ? "No files stored yet." : "No more files.";
      empty.appendChild(td);
      wanted.push(empty);
    }
    items.forEach(function (it) {
      var key = it.hash || "";
      var tr = existing[key];
      if (tr) delete existing[key]; // a hash listed twice gets a second row
      else tr = buildRow(it);
      fillRow(tr, it);
      wanted.push(tr);
    });
    Array.prototype.slice.call(body.children).forEach(function (tr) {
      if (wanted.indexOf(tr) === -1) body.removeChild(tr);
    });
    // Rows that keep their order are never moved; new rows are inserted around them.
    wanted.forEach(function (tr, i) {
      var at = body.children[i] || null;
      if (at !== tr) placeRow(body, tr, at);
    });
    if (before) restoreFocus(before);
  }

  function updatePager(count) {
    // Not disabled while loading (a disabled button drops keyboard focus); the click handlers ignore clicks then.
    $("prev-page").disabled = table.stack.length === 0;
    $("next-page").disabled = !table.nextToken;
    if (table.loading) {
      $("table-status").textContent = "Loading page " + table.pageNo + "…";
      return;
    }
    var start = (table.pageNo - 1) * table.pageSize + 1;
    setText(
      $("table-status"),
      "Page " + table.pageNo + (count > 0 ? " · rows " + start + "–" + (start + count - 1) : " · no rows") +
        (table.nextToken ? "" : " · last page")
    );
  }

  /** After the current load: announce the pager status if the user paged (also when a later load took over). */
  function loadEnded() {
    if (!table.announce) return;
    table.announce = false;
    D.announce($("table-status").textContent);
  }

  /**
   * Loads the current page, superseding any load in flight. quiet: a background refresh (new files, duplicates,
   * recovery) that keeps the rows and the pager text as they are until the answer arrives, so nothing flickers.
   * announce: announce the pager status once the page is shown (pager clicks).
   *
   * The table's data-loaded-for-files attribute is the total_files of the latest statistics when the shown page
   * was requested; it is absent while a load (quiet or not) is in flight, and after a failed one.
   */
  function loadPage(opts) {
    var quiet = !!(opts && opts.quiet);
    var req = ++table.request;
    var last = samples[samples.length - 1];
    var files = last ? String(last.total_files) : "";
    var tableEl = $("hashes-table");
    tableEl.removeAttribute("data-loaded-for-files");
    if (opts && opts.announce) table.announce = true;
    if (!quiet) {
      table.loading = true;
      tableEl.setAttribute("aria-busy", "true");
      updatePager(0);
    }
    var path = "/admin/hashes?limit=" + table.pageSize;
    if (table.token) path += "&last_evaluated_key=" + encodeURIComponent(table.token);
    return D.apiFetch("GET", path).then(
      function (res) {
        if (req !== table.request) return;
        var body = res.body || {};
        var items = Array.isArray(body.items) ? body.items : [];
        table.nextToken = body.last_evaluated_key || null;
        table.loading = false;
        table.loaded = true;
        table.failed = false;
        tableEl.removeAttribute("aria-busy");
        $("table-error").hidden = true;
        renderRows(items);
        updatePager(items.length);
        tableEl.setAttribute("data-loaded-for-files", files);
        loadEnded();
      },
      function (err) {
        if (req !== table.request) return;
        if (refused(err)) return;
        table.loading = false;
        table.failed = true;
        tableEl.removeAttribute("aria-busy");
        var box = $("table-error");
        var msg =
          "Could not load stored files: " + D.describeError(err) +
          ". Trying again with the next statistics update, or use Refresh.";
        if (box.hidden || box.textContent !== msg) {
          box.textContent = msg;
          box.hidden = false;
        }
        table.nextToken = null;
        updatePager(0);
        setText($("table-status"), "Page " + table.pageNo + " · failed to load");
        loadEnded();
      }
    );
  }

  // ---------------------------------------------------------------- access

  /** Stops polling and ignores every answer still in flight. */
  function stop() {
    statsGeneration++;
    window.clearTimeout(statsTimer);
    statsTimer = null;
    table.request++;
    table.loading = false;
    table.announce = false;
    if (D.historyView) D.historyView.stop();
  }

  /**
   * A 403 from /admin/*: the signed-in user is not an administrator (or the API refuses the account). Polling
   * stops (asking again cannot change the answer) and the dashboard gives way to a notice saying so. A 401 is
   * handled by the sign-in (DFD.apiFetch signs the page out). Returns true if err was such a refusal.
   */
  function refused(err) {
    if (!(err instanceof D.ApiError) || err.status !== 403) return false;
    if (forbidden) return true;
    forbidden = true;
    stop();
    var who = D.auth.identity();
    var admins = err.code === "forbidden" || err.code === "http_403";
    $("admins-only-heading").textContent = admins ? "Admins only" : "Access refused";
    $("admins-only-text").hidden = !admins;
    $("admins-only-detail").textContent =
      (who ? "Signed in as " + who.username + " (tenant " + who.tenant + "). " : "") +
      "The API answered: " + D.describeError(err) + ".";
    var dashboard = $("dashboard");
    var active = document.activeElement;
    var lost = !active || active === document.body || dashboard.contains(active);
    dashboard.hidden = true;
    $("admins-only").hidden = false;
    if (lost) $("admins-only-heading").focus();
    D.announce(
      admins
        ? "Admins only: this dashboard needs an administrator account" + (who ? "; " + who.username + " is not one." : ".")
        : "Access refused: " + D.describeError(err)
    );
    return true;
  }

  /** Signed in (again, or as someone else): start from scratch. */
  function begin() {
    stop();
    forbidden = false;
    $("admins-only").hidden = true;
    $("dashboard").hidden = false;
    samples = [];
    chartStart = Date.now();
    lastStatsError = "";
    $("stats-error").hidden = true;
    $("table-error").hidden = true;
    table.loaded = false;
    table.failed = false;
    resetTable();
    renderChart();
    statsLoop();
    loadPage();
    if (D.historyView) D.historyView.begin();
  }

  function resetTable() {
    table.token = null;
    table.stack = [];
    table.pageNo = 1;
    table.nextToken = null;
  }

  function init() {
    $("chart-metric").addEventListener("change", renderChart);
    var resizeTimer = null;
    window.addEventListener("resize", function () {
      window.clearTimeout(resizeTimer);
      resizeTimer = window.setTimeout(renderChart, 150);
    });

    // A long name is cut to two lines; a click or tap shows it in full (keyboard focus in the row does too).
    $("hashes-body").addEventListener("click", function (ev) {
      var name = ev.target.closest ? ev.target.closest(".name-text") : null;
      if (name && !window.getSelection().toString()) name.classList.toggle("is-expanded");
    });

    var pageSize = $("page-size");
    table.pageSize = parseInt(pageSize.value, 10) || 25;
    pageSize.addEventListener("change", function () {
      table.pageSize = parseInt(pageSize.value, 10) || 25;
      resetTable();
      loadPage();
    });
    $("next-page").addEventListener("click", function () {
      if (!table.nextToken || table.loading) return;
      table.stack.push(table.token);
      table.token = table.nextToken;
      table.pageNo++;
      loadPage({ announce: true });
    });
    $("prev-page").addEventListener("click", function () {
      if (!table.stack.length || table.loading) return;
      table.token = table.stack.pop();
      table.pageNo--;
      loadPage({ announce: true });
    });
    $("refresh-page").addEventListener("click", function () {
      loadPage();
    });

    renderChart();
    D.auth.start({
      onSignIn: begin,
      onSignOut: function () {
        stop();
        // The next user starts from an empty dashboard.
        document.querySelectorAll(".stats-grid [id^='stat-']").forEach(function (node) {
          node.textContent = "—";
          node.removeAttribute("data-value");
        });
        $("hashes-body").textContent = "";
        $("hashes-table").removeAttribute("data-loaded-for-files");
        $("stats-updated").textContent = "Loading…";
        $("table-status").textContent = "Loading…";
      },
    });
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
