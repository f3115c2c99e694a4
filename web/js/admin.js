/* dfd web — admin dashboard: /admin/stats every 3 s with a live SVG chart, and a paged table of /admin/hashes. */
(function () {
  "use strict";

  var D = window.DFD;
  var STATS_INTERVAL_MS = 3000;
  var MAX_SAMPLES = 60;
  var SVG_NS = "http://www.w3.org/2000/svg";

  var STAT_FIELDS = [
    { key: "total_files", kind: "count" },
    { key: "total_uploads", kind: "count" },
    { key: "duplicates_avoided", kind: "count" },
    { key: "total_bytes_stored", kind: "bytes" },
    { key: "total_s3_size_saved", kind: "bytes" },
  ];

  var CHARTS = {
    counts: {
      format: D.formatNumber,
      series: [
        { key: "total_uploads", label: "Uploads", color: "#0b57d0" },
        { key: "total_files", label: "Files stored", color: "#146c2e" },
        { key: "duplicates_avoided", label: "Duplicates avoided", color: "#a8460b" },
      ],
    },
    bytes: {
      format: D.formatBytes,
      series: [
        { key: "total_bytes_stored", label: "Bytes stored", color: "#0b57d0" },
        { key: "total_s3_size_saved", label: "Bytes saved", color: "#a8460b" },
      ],
    },
  };

  var samples = [];
  var statsTimer = null;
  var statsGeneration = 0;
  var lastStatsError = "";
  var lastTotalFiles = null;

  var table = {
    pageSize: 25,
    token: null, // last_evaluated_key that produced the current page (null = first page)
    stack: [], // tokens of the previous pages, for "Previous"
    pageNo: 1,
    nextToken: null,
    request: 0,
    loading: false,
  };

  function $(id) {
    return document.getElementById(id);
  }

  function svg(tag, attrs) {
    var node = document.createElementNS(SVG_NS, tag);
    Object.keys(attrs || {}).forEach(function (k) {
      node.setAttribute(k, String(attrs[k]));
    });
    return node;
  }

  // ---------------------------------------------------------------- stats

  function num(v) {
    var n = Number(v);
    return isFinite(n) ? n : 0;
  }

  function renderStats(s) {
    STAT_FIELDS.forEach(function (f) {
      var node = $("stat-" + f.key);
      var value = num(s[f.key]);
      node.setAttribute("data-value", String(value));
      if (f.kind === "bytes") {
        node.textContent = D.formatBytes(value);
        node.title = D.formatNumber(value) + " bytes";
      } else {
        node.textContent = D.formatNumber(value);
      }
    });
    var uploads = num(s.total_uploads);
    var dups = num(s.duplicates_avoided);
    var ratio = uploads > 0 ? dups / uploads : NaN;
    var ratioEl = $("stat-dedup_ratio");
    ratioEl.textContent = uploads > 0 ? D.formatPercent(ratio) : "—";
    ratioEl.setAttribute("data-value", uploads > 0 ? String(ratio) : "");
    ratioEl.title = dups + " of " + uploads + " uploads were duplicates";
    var stored = num(s.total_bytes_stored);
    var saved = num(s.total_s3_size_saved);
    var bytesRatio = stored + saved > 0 ? saved / (stored + saved) : NaN;
    var bytesEl = $("stat-bytes_saved_ratio");
    bytesEl.textContent = stored + saved > 0 ? D.formatPercent(bytesRatio) : "—";
    bytesEl.setAttribute("data-value", stored + saved > 0 ? String(bytesRatio) : "");
  }

  function fetchStats() {
    var generation = statsGeneration;
    return D.apiFetch("GET", "/admin/stats").then(
      function (res) {
        if (generation !== statsGeneration) return;
        var s = res.body || {};
        renderStats(s);
        var sample = { t: Date.now() };
        STAT_FIELDS.forEach(function (f) {
          sample[f.key] = num(s[f.key]);
        });
        samples.push(sample);
        if (samples.length > MAX_SAMPLES) samples.splice(0, samples.length - MAX_SAMPLES);
        renderChart();
        $("stats-updated").textContent = "Updated " + new Date().toLocaleTimeString();
        if (lastStatsError) {
          lastStatsError = "";
          $("stats-error").hidden = true;
          D.announce("Statistics are available again.");
        }
        // A new file appeared: refresh the first page of the table so it shows up without a click. Also while a
        // load is in flight (it may predate the file): loadPage() supersedes it, so the change is not lost.
        var files = num(s.total_files);
        if (lastTotalFiles !== null && files !== lastTotalFiles && table.stack.length === 0) {
          loadPage();
        }
        lastTotalFiles = files;
      },
      function (err) {
        if (generation !== statsGeneration) return;
        var msg = "Could not load statistics: " + D.describeError(err);
        $("stats-updated").textContent = "Last attempt " + new Date().toLocaleTimeString() + " failed; retrying every 3 s";
        if (msg !== lastStatsError) {
          lastStatsError = msg;
          var box = $("stats-error");
          box.textContent = msg;
          box.hidden = false;
        }
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

  function renderChart() {
    var metric = $("chart-metric").value;
    var cfg = CHARTS[metric] || CHARTS.counts;
    var chart = $("stats-chart");
    // The viewBox follows the rendered width, so text and strokes keep their pixel size on any screen.
    var W = Math.max(280, Math.round(chart.getBoundingClientRect().width) || 900);
    var H = W < 520 ? 180 : 220;
    chart.setAttribute("viewBox", "0 0 " + W + " " + H);
    var L = 64;
    var R = 12;
    var T = 12;
    var B = 24;
    var pw = W - L - R;
    var ph = H - T - B;

    // Keep <title>/<desc>, redraw everything else.
    Array.prototype.slice.call(chart.childNodes).forEach(function (n) {
      if (n.nodeName !== "title" && n.nodeName !== "desc") chart.removeChild(n);
    });
    chart.setAttribute("data-points", String(samples.length));
    $("chart-count").textContent = String(samples.length);

    var maxVal = 0;
    samples.forEach(function (s) {
      cfg.series.forEach(function (ser) {
        maxVal = Math.max(maxVal, s[ser.key]);
      });
    });
    var yMax = metric === "bytes" ? niceMaxBytes(maxVal) : niceMax(maxVal);

    var grid = svg("g", { class: "chart-grid", "aria-hidden": "true" });
    [0, 0.5, 1].forEach(function (f) {
      var y = T + ph - f * ph;
      grid.appendChild(svg("line", { x1: L, x2: W - R, y1: y, y2: y }));
      var label = svg("text", { x: L - 6, y: y + 4, "text-anchor": "end" });
      label.textContent = cfg.format(yMax * f);
      grid.appendChild(label);
    });
    var left = svg("text", { x: L, y: H - 6, "text-anchor": "start" });
    left.textContent = Math.round(((MAX_SAMPLES - 1) * STATS_INTERVAL_MS) / 60000) + " min ago";
    var right = svg("text", { x: W - R, y: H - 6, "text-anchor": "end" });
    right.textContent = "now";
    grid.appendChild(left);
    grid.appendChild(right);
    chart.appendChild(grid);

    var offset = MAX_SAMPLES - samples.length;
    function px(i) {
      return L + ((offset + i) / (MAX_SAMPLES - 1)) * pw;
    }
    function py(v) {
      return T + ph - (v / yMax) * ph;
    }
    cfg.series.forEach(function (ser) {
      if (!samples.length) return;
      var pts = samples
        .map(function (s, i) {
          return px(i).toFixed(1) + "," + py(s[ser.key]).toFixed(1);
        })
        .join(" ");
      chart.appendChild(
        svg("polyline", {
          points: pts,
          fill: "none",
          stroke: ser.color,
          "stroke-width": 2,
          "stroke-linejoin": "round",
          "vector-effect": "non-scaling-stroke",
          "data-series": ser.key,
        })
      );
      var last = samples[samples.length - 1];
      chart.appendChild(
        svg("circle", { cx: px(samples.length - 1), cy: py(last[ser.key]), r: 3, fill: ser.color })
      );
    });

    var legend = $("chart-legend");
    legend.textContent = "";
    var last = samples[samples.length - 1];
    var desc = [];
    cfg.series.forEach(function (ser) {
      var li = document.createElement("li");
      var sw = document.createElement("span");
      sw.className = "swatch";
      sw.style.backgroundColor = ser.color;
      sw.setAttribute("aria-hidden", "true");
      li.appendChild(sw);
      var value = last ? cfg.format(last[ser.key]) : "—";
      li.appendChild(document.createTextNode(ser.label + ": " + value));
      legend.appendChild(li);
      desc.push(ser.label + " " + value);
    });
    $("chart-desc").textContent = samples.length
      ? "Latest of " + samples.length + " samples: " + desc.join(", ") + "."
      : "No samples yet.";
  }

  // ---------------------------------------------------------------- table

  function cell(text, className) {
    var td = document.createElement("td");
    if (className) td.className = className;
    if (text !== undefined) td.textContent = text;
    return td;
  }

  function renderRows(items) {
    var body = $("hashes-body");
    body.textContent = "";
    if (!items.length) {
      var tr = document.createElement("tr");
      var td = cell(table.pageNo === 1 ? "No files stored yet." : "No more files.", "empty");
      td.colSpan = 7;
      tr.appendChild(td);
      body.appendChild(tr);
      return;
    }
    items.forEach(function (it) {
      var tr = document.createElement("tr");
      tr.setAttribute("data-testid", "hash-row");
      tr.setAttribute("data-hash", it.hash || "");

      var nameTd = cell(it.filename || "(unnamed)", "col-name");
      nameTd.title = it.filename || "";
      tr.appendChild(nameTd);

      var hashTd = cell(undefined, "col-hash");
      var code = document.createElement("code");
      code.className = "hash-short";
      code.textContent = it.hash || "";
      code.title = it.hash || "";
      hashTd.appendChild(code);
      tr.appendChild(hashTd);

      var sizeTd = cell(D.formatBytes(it.size), "num");
      sizeTd.title = D.formatNumber(it.size) + " bytes";
      sizeTd.setAttribute("data-value", String(it.size));
      tr.appendChild(sizeTd);

      tr.appendChild(cell(it.content_type || "—", "col-type"));

      var dateTd = cell(undefined, "col-date");
      var d = D.parseDate(it.created_at);
      if (d) {
        var time = document.createElement("time");
        time.dateTime = d.toISOString();
        time.textContent = D.formatDate(it.created_at);
        dateTd.appendChild(time);
      } else {
        dateTd.textContent = it.created_at ? String(it.created_at) : "—";
      }
      tr.appendChild(dateTd);

      tr.appendChild(cell(it.upload_count !== undefined ? D.formatNumber(it.upload_count) : "—", "num"));

      var actTd = cell(undefined, "col-actions");
      var btn = document.createElement("button");
      btn.type = "button";
      btn.className = "btn btn-small";
      btn.setAttribute("data-testid", "hash-download");
      btn.textContent = "Download";
      var hidden = document.createElement("span");
      hidden.className = "visually-hidden";
      hidden.textContent = " " + (it.filename || it.hash);
      btn.appendChild(hidden);
      var status = document.createElement("span");
      status.className = "download-fallback";
      btn.addEventListener("click", function () {
        D.downloadFile(it.hash, btn, status);
      });
      actTd.appendChild(btn);
      actTd.appendChild(status);
      tr.appendChild(actTd);

      $("hashes-body").appendChild(tr);
    });
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
    $("table-status").textContent =
      "Page " + table.pageNo + (count > 0 ? " · rows " + start + "–" + (start + count - 1) : " · no rows") +
      (table.nextToken ? "" : " · last page");
  }

  function loadPage() {
    var req = ++table.request;
    table.loading = true;
    $("hashes-table").setAttribute("aria-busy", "true");
    updatePager(0);
    var path = "/admin/hashes?limit=" + table.pageSize;
    if (table.token) path += "&last_evaluated_key=" + encodeURIComponent(table.token);
    return D.apiFetch("GET", path).then(
      function (res) {
        if (req !== table.request) return;
        var body = res.body || {};
        var items = Array.isArray(body.items) ? body.items : [];
        table.nextToken = body.last_evaluated_key || null;
        table.loading = false;
        $("hashes-table").removeAttribute("aria-busy");
        $("table-error").hidden = true;
        renderRows(items);
        updatePager(items.length);
      },
      function (err) {
        if (req !== table.request) return;
        table.loading = false;
        $("hashes-table").removeAttribute("aria-busy");
        var box = $("table-error");
        box.textContent =
          "Could not load stored files: " + D.describeError(err) +
          ". Use Refresh to try again.";
        box.hidden = false;
        table.nextToken = null;
        updatePager(0);
        $("table-status").textContent = "Page " + table.pageNo + " · failed to load";
      }
    );
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
      loadPage().then(function () {
        D.announce($("table-status").textContent);
      });
    });
    $("prev-page").addEventListener("click", function () {
      if (!table.stack.length || table.loading) return;
      table.token = table.stack.pop();
      table.pageNo--;
      loadPage().then(function () {
        D.announce($("table-status").textContent);
      });
    });
    $("refresh-page").addEventListener("click", function () {
      loadPage();
    });

    D.initSettings(function () {
      statsGeneration++;
      samples = [];
      lastTotalFiles = null;
      renderChart();
      resetTable();
      statsLoop();
      loadPage();
    });

    renderChart();
    statsLoop();
    loadPage();
  }

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
