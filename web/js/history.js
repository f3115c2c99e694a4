/* dfd web — admin dashboard over days and weeks: the counters' history (/admin/stats/history) drawn by uPlot, and
 * every tenant's totals (/admin/tenants), sorted and paged. admin.js calls DFD.historyView.begin() on sign-in and
 * .stop() on sign-out. The chosen range, series and table order are kept in localStorage (they survive a reload).
 *
 * The chart's container carries what it draws: data-state (loading, ready, empty, error) and data-points, the JSON
 * {from, to, step, at: [...], series: {key: [...]}, carried: [key...]} of the API's points (an interval the API has
 * none for is null; `carried`: the keys some interval has). A group draws the series of its list the API carries:
 * a series is one line of METRICS. At the cursor (the mouse, or the focused chart's arrow keys, Home and End) the
 * legend and the readout below the chart show the point's exact figures. */
(function () {
  "use strict";

  var D = window.DFD;
  var STORE_KEY = "dfd.admin.history";
  var DAY = 86400;
  // the API's steps and the longest range each takes (docs/openapi.yaml): 7 days at 5 min, 92 at 1 h, 800 at 1 d
  var STEPS = [
    { step: 300, max: 7 * DAY },
    { step: 3600, max: 92 * DAY },
    { step: 86400, max: 800 * DAY },
  ];
  var RANGES = { "24h": { span: DAY, step: 300 }, "7d": { span: 7 * DAY, step: 3600 }, "30d": { span: 30 * DAY, step: 3600 } };
  var MAX_POINTS = 800; // a custom range takes the finest step that keeps it at most this many points

  function bytesExact(v) {
    return D.formatBytes(v) + " (" + D.formatNumber(v) + " B)";
  }
  function percent(v) {
    return (v * 100).toFixed(2) + " %";
  }
  /** The ratio at point i exactly: its percentage and the interval's duplicates of its uploads. */
  function ratioExact(v, i) {
    if (!shown || i === null || i === undefined) return percent(v);
    var dups = shown.series.duplicates[i];
    var ups = shown.series.uploads[i];
    if (dups === null || ups === null) return percent(v);
    return percent(v) + " (" + D.formatNumber(dups) + " of " + D.formatNumber(ups) + ")";
  }

  var METRICS = {
    counts: {
      label: "Uploads, duplicates and deletes per interval",
      format: D.formatNumber,
      axis: D.formatNumber,
      series: [
        { key: "uploads", label: "Uploads", color: "#0b57d0", dark: "#8ab4f8" },
        { key: "duplicates", label: "Duplicates", color: "#a8460b", dark: "#f9ab7a" },
        { key: "deletes", label: "Deletes", color: "#146c2e", dark: "#81c995" },
      ],
    },
    bytes: {
      label: "Bytes saved and change in stored bytes per interval",
      format: bytesExact,
      axis: D.formatBytes,
      series: [
        { key: "bytes_saved", label: "Bytes saved", color: "#a8460b", dark: "#f9ab7a" },
        { key: "bytes_stored_change", label: "Change in bytes stored", color: "#0b57d0", dark: "#8ab4f8" },
        { key: "bytes_reaped", label: "Bytes reaped", color: "#5f6368", dark: "#bdc1c6" },
      ],
    },
    contents: {
      label: "New contents, contents reaped, expired, failed and rejected uploads per interval",
      format: D.formatNumber,
      axis: D.formatNumber,
      series: [
        { key: "new_contents", label: "New contents", color: "#0b57d0", dark: "#8ab4f8" },
        { key: "contents_reaped", label: "Contents reaped", color: "#5f6368", dark: "#bdc1c6" },
        { key: "expired_uploads", label: "Expired uploads", color: "#a8460b", dark: "#f9ab7a" },
        { key: "failed_uploads", label: "Failed uploads", color: "#b3261e", dark: "#f2b8b5" },
        { key: "rejected_uploads", label: "Rejected uploads", color: "#7d5700", dark: "#f0bf48" },
      ],
    },
    ratio: {
      label: "Dedup ratio per interval (duplicates of uploads)",
      format: ratioExact,
      axis: function (v) {
        return (v * 100).toFixed(0) + " %";
      },
      series: [{ key: "dedup_ratio", label: "Dedup ratio", color: "#7b1fa2", dark: "#d7aefb" }],
    },
  };

  var TENANT_COLUMNS = [
    { key: "tenant", label: "Tenant" },
    { key: "files", label: "Files", num: true },
    { key: "bytes", label: "Bytes", num: true, bytes: true },
    { key: "uploads", label: "Uploads", num: true },
    { key: "duplicates", label: "Duplicates", num: true },
    { key: "bytes_saved", label: "Bytes saved", num: true, bytes: true },
    { key: "used_bytes", label: "Quota use", num: true, bytes: true },
    { key: "pending_uploads", label: "Pending", num: true },
  ];

  var state = { range: "24h", from: "", to: "", metric: "counts", sort: "tenant", order: "asc", pageSize: 25 };
  var plot = null;
  var plotted = []; // the series the plot draws (of METRICS[state.metric].series)
  var shown = null; // the data last drawn
  var request = 0;
  var tenants = { cursor: null, stack: [], next: null, pageNo: 1, request: 0 };
  var active = false;

  function $(id) {
    return document.getElementById(id);
  }

  function load() {
    try {
      var saved = JSON.parse(window.localStorage.getItem(STORE_KEY) || "{}");
      Object.keys(state).forEach(function (k) {
        if (saved && typeof saved[k] === typeof state[k]) state[k] = saved[k];
      });
    } catch (e) {
      /* a stored value that is not JSON: the defaults */
    }
    if (!RANGES[state.range] && state.range !== "custom") state.range = "24h";
    if (!METRICS[state.metric]) state.metric = "counts";
  }

  function save() {
    try {
      window.localStorage.setItem(STORE_KEY, JSON.stringify(state));
    } catch (e) {
      /* storage refused (private mode): the choice lasts until the reload */
    }
  }

  function isoDay(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 10);
  }

  function parseDay(text) {
    if (!/^\d{4}-\d{2}-\d{2}$/.test(text || "")) return null;
    var t = Date.parse(text + "T00:00:00Z");
    return isFinite(t) ? t / 1000 : null;
  }

  /** The query for the chosen range: {from, to, step}, or {error} for a custom range the API would refuse. */
  function query() {
    var now = Math.floor(Date.now() / 1000);
    if (state.range !== "custom") {
      var r = RANGES[state.range];
      var to = now - (now % r.step) + r.step;
      return { from: to - r.span, to: to, step: r.step };
    }
    var from = parseDay(state.from);
    var end = parseDay(state.to);
    if (from === null || end === null) return { error: "Choose both days of the custom range." };
    end += DAY; // the "to" day is included
    if (end <= from) return { error: "The custom range's first day must not be after its last." };
    for (var i = 0; i < STEPS.length; i++) {
      var s = STEPS[i];
      if (end - from <= s.max && (end - from) / s.step <= MAX_POINTS) return { from: from, to: end, step: s.step };
      if (i === STEPS.length - 1 && end - from <= s.max) return { from: from, to: end, step: s.step };
    }
    return { error: "A custom range spans at most 800 days." };
  }

  function dark() {
    return window.matchMedia && window.matchMedia("(prefers-color-scheme: dark)").matches;
  }

  function stepLabel(step) {
    return step === 300 ? "5 min" : step === 3600 ? "1 h" : "1 day";
  }

  /** The data drawn from an answer: the points' starts and each interval figure (null without an interval). */
  function toData(q, body) {
    var points = Array.isArray(body.points) ? body.points : [];
    var data = { from: q.from, to: q.to, step: q.step, at: [], series: {}, carried: [] };
    Object.keys(METRICS).forEach(function (m) {
      METRICS[m].series.forEach(function (s) {
        data.series[s.key] = [];
      });
    });
    points.forEach(function (p) {
      data.at.push(Number(p.at));
      Object.keys(data.series).forEach(function (k) {
        var v = p.interval ? p.interval[k] : null;
        data.series[k].push(v === null || v === undefined ? null : Number(v));
        if (p.interval && k in p.interval && data.carried.indexOf(k) < 0) data.carried.push(k);
      });
    });
    return data;
  }

  function chartWidth() {
    var box = $("history-chart");
    return Math.max(280, Math.floor(box.clientWidth || 600));
  }

  /** The series of the chosen group that the shown points carry. */
  function carriedSeries() {
    if (!shown) return [];
    return METRICS[state.metric].series.filter(function (s) {
      return shown.carried.indexOf(s.key) >= 0;
    });
  }

  function timeLabel(seconds) {
    return new Date(seconds * 1000).toISOString().slice(0, 16).replace("T", " ") + " UTC";
  }

  /** The readout below the chart: point i's start and each drawn series' exact figure there. */
  function readout(i) {
    var out = $("history-point");
    if (!shown || i === null || i === undefined || i < 0 || i >= shown.at.length) {
      out.textContent = plotted.length
        ? "Point at a time, or focus the chart and use the arrow keys, Home and End, for its exact figures."
        : "";
      out.removeAttribute("data-at");
      return;
    }
    var metric = METRICS[state.metric];
    out.setAttribute("data-at", String(shown.at[i]));
    out.textContent =
      timeLabel(shown.at[i]) +
      ": " +
      plotted
        .map(function (s) {
          var v = shown.series[s.key][i];
          return s.label + " " + (v === null ? "no interval" : metric.format(v, i));
        })
        .join(", ");
  }

  /** Moves the chart's cursor by a key (arrows: the next point, Home and End: the first and last); true if it did. */
  function keyCursor(key) {
    if (!plot || !shown || !shown.at.length) return false;
    var last = shown.at.length - 1;
    var idx = plot.cursor.idx;
    var at = idx === null || idx === undefined ? -1 : idx;
    if (key === "ArrowRight") at = at < 0 ? 0 : Math.min(last, at + 1);
    else if (key === "ArrowLeft") at = at < 0 ? last : Math.max(0, at - 1);
    else if (key === "Home") at = 0;
    else if (key === "End") at = last;
    else return false;
    var top = plot.over ? plot.over.clientHeight / 2 : 0;
    plot.setCursor({ left: plot.valToPos(shown.at[at], "x"), top: top });
    return true;
  }

  function draw() {
    var box = $("history-chart");
    if (plot) {
      plot.destroy();
      plot = null;
    }
    plotted = carriedSeries();
    readout(null);
    if (!shown || !shown.at.length || !plotted.length || typeof window.uPlot !== "function") return;
    var metric = METRICS[state.metric];
    var isDark = dark();
    var ink = getComputedStyle(document.body).color;
    var grid = isDark ? "rgba(255,255,255,0.12)" : "rgba(0,0,0,0.10)";
    var series = [
      {
        label: "Interval from (UTC)",
        value: function (u, v) {
          return v === null || v === undefined ? "—" : timeLabel(v).slice(0, -4);
        },
      },
    ];
    var data = [shown.at];
    plotted.forEach(function (s) {
      series.push({
        label: s.label,
        stroke: isDark ? s.dark : s.color,
        width: 2,
        spanGaps: false,
        points: { show: shown.at.length <= 60 },
        value: function (u, v, seriesIdx, idx) {
          return v === null || v === undefined ? "—" : metric.format(v, idx);
        },
      });
      data.push(shown.series[s.key]);
    });
    var axis = { stroke: ink, grid: { stroke: grid }, ticks: { stroke: grid } };
    plot = new window.uPlot(
      {
        width: chartWidth(),
        height: 260,
        tzDate: function (ts) {
          return window.uPlot.tzDate(new Date(ts * 1000), "Etc/UTC");
        },
        series: series,
        scales: { x: { time: true, range: [shown.from, shown.to] } },
        axes: [
          axis,
          {
            stroke: ink,
            grid: { stroke: grid },
            ticks: { stroke: grid },
            size: 70,
            values: function (u, vals) {
              return vals.map(metric.axis);
            },
          },
        ],
        legend: { live: true },
        cursor: { focus: { prox: 16 } },
        hooks: {
          setCursor: [
            function (u) {
              if (u.cursor.idx !== null && u.cursor.idx !== undefined) readout(u.cursor.idx);
            },
          ],
        },
      },
      data,
      box
    );
  }

  function setChartState(name, text) {
    var box = $("history-chart");
    box.setAttribute("data-state", name);
    $("history-status").textContent = text;
    $("history-empty").hidden = name !== "empty";
  }

  function showControls() {
    $("history-range").value = state.range;
    $("history-metric").value = state.metric;
    var custom = state.range === "custom";
    $("history-custom").hidden = !custom;
    var q = query();
    if (!custom && !q.error) {
      $("history-from").value = isoDay(q.from);
      $("history-to").value = isoDay(q.to - 1);
    } else {
      $("history-from").value = state.from;
      $("history-to").value = state.to;
    }
  }

  function loadHistory() {
    if (!active) return Promise.resolve();
    var req = ++request;
    var box = $("history-chart");
    var q = query();
    $("history-error").hidden = true;
    if (q.error) {
      shown = null;
      box.removeAttribute("data-points");
      draw();
      $("history-error").textContent = q.error;
      $("history-error").hidden = false;
      setChartState("error", "");
      return Promise.resolve();
    }
    box.setAttribute("aria-busy", "true");
    setChartState("loading", "Loading…");
    var path = "/admin/stats/history?from=" + q.from + "&to=" + q.to + "&step=" + q.step;
    return D.apiFetch("GET", path).then(
      function (res) {
        if (req !== request) return;
        box.removeAttribute("aria-busy");
        shown = toData(q, res.body || {});
        box.setAttribute("data-points", JSON.stringify(shown));
        var span = isoDay(q.from) + " to " + isoDay(q.to - 1) + " (UTC), one point per " + stepLabel(q.step);
        if (!shown.at.length) {
          setChartState("empty", span + ": no snapshots.");
        } else {
          setChartState("ready", span + ": " + D.formatNumber(shown.at.length) + (shown.at.length === 1 ? " point." : " points."));
        }
        $("history-chart-desc").textContent = METRICS[state.metric].label + ", " + span + ".";
        draw();
        summarize();
      },
      function (err) {
        if (req !== request) return;
        box.removeAttribute("aria-busy");
        shown = null;
        box.removeAttribute("data-points");
        draw();
        $("history-error").textContent = "Could not load the history: " + D.describeError(err) + ".";
        $("history-error").hidden = false;
        setChartState("error", "");
      }
    );
  }

  /** The range's sums of the figures the chart shows, exact (the intervals that have a point). */
  function summarize() {
    var list = $("history-sums");
    list.textContent = "";
    if (!shown || !shown.at.length) return;
    var metric = METRICS[state.metric];
    if (state.metric === "ratio") return;
    plotted.forEach(function (s) {
      var sum = 0;
      shown.series[s.key].forEach(function (v) {
        if (v !== null) sum += v;
      });
      var li = document.createElement("li");
      li.setAttribute("data-testid", "history-sum-" + s.key);
      li.setAttribute("data-value", String(sum));
      li.textContent = s.label + " in the range: " + metric.format(sum);
      list.appendChild(li);
    });
  }

  // ---------------------------------------------------------------- tenants

  function tenantsPath() {
    var path = "/admin/tenants?sort=" + state.sort + "&order=" + state.order + "&limit=" + state.pageSize;
    if (tenants.cursor) path += "&cursor=" + encodeURIComponent(tenants.cursor);
    return path;
  }

  function showSort() {
    TENANT_COLUMNS.forEach(function (c) {
      var th = $("tenants-th-" + c.key);
      th.setAttribute("aria-sort", c.key === state.sort ? (state.order === "asc" ? "ascending" : "descending") : "none");
      var mark = th.querySelector(".sort-mark");
      mark.textContent = c.key === state.sort ? (state.order === "asc" ? " ▲" : " ▼") : "";
    });
  }

  function tenantCell(row, c) {
    var td = document.createElement("td");
    td.setAttribute("role", "cell");
    td.setAttribute("data-label", c.label);
    if (c.num) td.className = "num";
    var v = row[c.key];
    if (c.key === "tenant") {
      td.textContent = String(v);
    } else if (c.key === "used_bytes") {
      td.textContent = D.formatBytes(v) + (row.quota_bytes ? " of " + D.formatBytes(row.quota_bytes) : "");
      td.title = D.formatNumber(v) + " bytes" + (row.quota_bytes ? " of " + D.formatNumber(row.quota_bytes) : "");
    } else if (c.bytes) {
      td.textContent = D.formatBytes(v);
      td.title = D.formatNumber(v) + " bytes";
    } else {
      td.textContent = D.formatNumber(v);
    }
    td.setAttribute("data-value", String(v));
    return td;
  }

  function loadTenants(announce) {
    if (!active) return Promise.resolve();
    var req = ++tenants.request;
    var tableEl = $("tenants-table");
    tableEl.setAttribute("aria-busy", "true");
    tableEl.removeAttribute("data-page");
    $("tenants-status").textContent = "Loading page " + tenants.pageNo + "…";
    return D.apiFetch("GET", tenantsPath()).then(
      function (res) {
        if (req !== tenants.request) return;
        var body = res.body || {};
        var items = Array.isArray(body.items) ? body.items : [];
        tenants.next = body.next || null;
        var tbody = $("tenants-body");
        tbody.textContent = "";
        items.forEach(function (row) {
          var tr = document.createElement("tr");
          tr.setAttribute("role", "row");
          tr.setAttribute("data-tenant", String(row.tenant));
          TENANT_COLUMNS.forEach(function (c) {
            tr.appendChild(tenantCell(row, c));
          });
          tbody.appendChild(tr);
        });
        if (!items.length) {
          var tr = document.createElement("tr");
          var td = document.createElement("td");
          td.colSpan = TENANT_COLUMNS.length;
          td.className = "empty";
          td.textContent = tenants.pageNo === 1 ? "No tenants yet." : "No more tenants.";
          tr.appendChild(td);
          tbody.appendChild(tr);
        }
        tableEl.removeAttribute("aria-busy");
        tableEl.setAttribute("data-page", String(tenants.pageNo));
        $("tenants-error").hidden = true;
        var start = (tenants.pageNo - 1) * state.pageSize + 1;
        $("tenants-status").textContent =
          "Page " + tenants.pageNo + (items.length ? " · tenants " + start + "–" + (start + items.length - 1) : "") +
          (tenants.next ? "" : " · last page");
        $("tenants-prev").disabled = tenants.stack.length === 0;
        $("tenants-next").disabled = !tenants.next;
        if (announce) D.announce($("tenants-status").textContent);
      },
      function (err) {
        if (req !== tenants.request) return;
        tableEl.removeAttribute("aria-busy");
        $("tenants-error").textContent = "Could not load the tenants: " + D.describeError(err) + ".";
        $("tenants-error").hidden = false;
        $("tenants-status").textContent = "Page " + tenants.pageNo + " · failed to load";
      }
    );
  }

  function firstTenantsPage() {
    tenants.cursor = null;
    tenants.stack = [];
    tenants.next = null;
    tenants.pageNo = 1;
  }

  function sortBy(key) {
    if (state.sort === key) state.order = state.order === "asc" ? "desc" : "asc";
    else {
      state.sort = key;
      state.order = key === "tenant" ? "asc" : "desc";
    }
    save();
    showSort();
    firstTenantsPage();
    loadTenants(true);
  }

  // ---------------------------------------------------------------- wiring

  function init() {
    load();
    showControls();
    $("history-range").addEventListener("change", function () {
      var before = query();
      state.range = $("history-range").value;
      if (state.range === "custom" && !state.from && !before.error) {
        state.from = isoDay(before.from);
        state.to = isoDay(before.to - 1);
      }
      save();
      showControls();
      loadHistory();
    });
    $("history-custom").addEventListener("submit", function (ev) {
      ev.preventDefault();
      state.from = $("history-from").value;
      state.to = $("history-to").value;
      save();
      loadHistory();
    });
    $("history-metric").addEventListener("change", function () {
      state.metric = $("history-metric").value;
      save();
      if (shown) $("history-chart-desc").textContent = METRICS[state.metric].label + ".";
      draw();
      summarize();
    });
    var resizeTimer = null;
    window.addEventListener("resize", function () {
      window.clearTimeout(resizeTimer);
      resizeTimer = window.setTimeout(function () {
        if (plot) plot.setSize({ width: chartWidth(), height: 260 });
      }, 150);
    });
    $("history-chart").addEventListener("keydown", function (ev) {
      if (ev.altKey || ev.ctrlKey || ev.metaKey) return;
      if (keyCursor(ev.key)) ev.preventDefault();
    });
    if (window.matchMedia) {
      var mq = window.matchMedia("(prefers-color-scheme: dark)");
      if (mq.addEventListener) mq.addEventListener("change", draw);
    }

    TENANT_COLUMNS.forEach(function (c) {
      $("tenants-th-" + c.key)
        .querySelector("button")
        .addEventListener("click", function () {
          sortBy(c.key);
        });
    });
    var size = $("tenants-page-size");
    size.value = String(state.pageSize);
    if (size.value !== String(state.pageSize)) state.pageSize = parseInt(size.value, 10) || 25;
    size.addEventListener("change", function () {
      state.pageSize = parseInt(size.value, 10) || 25;
      save();
      firstTenantsPage();
      loadTenants(false);
    });
    $("tenants-next").addEventListener("click", function () {
      if (!tenants.next) return;
      tenants.stack.push(tenants.cursor);
      tenants.cursor = tenants.next;
      tenants.pageNo++;
      loadTenants(true);
    });
    $("tenants-prev").addEventListener("click", function () {
      if (!tenants.stack.length) return;
      tenants.cursor = tenants.stack.pop();
      tenants.pageNo--;
      loadTenants(true);
    });
    $("tenants-refresh").addEventListener("click", function () {
      loadTenants(false);
    });
    showSort();
  }

  D.historyView = {
    begin: function () {
      active = true;
      firstTenantsPage();
      loadHistory();
      loadTenants(false);
    },
    stop: function () {
      active = false;
      request++;
      tenants.request++;
      shown = null;
      draw();
      $("history-chart").removeAttribute("data-points");
      $("tenants-body").textContent = "";
    },
  };

  if (document.readyState === "loading") document.addEventListener("DOMContentLoaded", init);
  else init();
})();
