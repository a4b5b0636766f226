// Training curves on the job page (docs/PROGRESS.md): one plotly.js chart per metric, over
// steps, one line per replica where the replicas differ. Data from
// GET /api/v1/jobs/…/progress (the server shapes it: dashboard/progressviews.py). Re-read
// whenever dashboard.js swaps in a new job fragment (a status write, e.g. new progress), and
// every 15 s while the page is visible (the curves are written a little after the status).
(function () {
  "use strict";
  const panel = document.getElementById("progress-panel");
  if (!panel || !panel.dataset.api || panel.dataset.api === "/progress") return;
  const box = document.getElementById("progress-charts");
  const empty = document.getElementById("progress-empty");
  let busy = false;
  let again = false;

  async function load() {
    if (busy) { again = true; return; }
    busy = true;
    try {
      const response = await fetch(panel.dataset.api, { credentials: "same-origin", cache: "no-store" });
      if (response.ok) draw(await response.json());
    } catch (err) {
      // The stream's own status line says when the server is gone; nothing to add here.
    } finally {
      busy = false;
      if (again) { again = false; load(); }
    }
  }

  function chartFor(metric) {
    for (const div of box.querySelectorAll(".progress-chart")) {
      if (div.dataset.metric === metric) return div;
    }
    const div = document.createElement("div");
    div.className = "progress-chart";
    div.dataset.metric = metric;
    box.appendChild(div);
    return div;
  }

  function draw(data) {
    const charts = data.charts || [];
    empty.hidden = charts.length > 0;
    if (!charts.length) return;
    if (!window.Plotly) {
      empty.hidden = false;
      empty.textContent = "The curves cannot be drawn: plotly.js did not load (is the plotly package installed where trainops runs?).";
      return;
    }
    charts.forEach(function (chart) {
      const div = chartFor(chart.metric);
      const traces = chart.traces.map(function (t) {
        return { type: "scatter", mode: "lines+markers", name: t.name, x: t.x, y: t.y, marker: { size: 4 } };
      });
      const layout = {
        title: { text: chart.metric, font: { size: 14 } },
        xaxis: { title: { text: "step" } },
        yaxis: { type: chart.scale === "log" ? "log" : "linear" },
        height: 240,
        margin: { l: 50, r: 20, t: 36, b: 40 },
        showlegend: traces.length > 1,
        legend: { orientation: "h" },
      };
      window.Plotly.react(div, traces, layout, { displayModeBar: false, responsive: true, staticPlot: false });
      div.dataset.points = String(traces.reduce(function (n, t) { return n + t.x.length; }, 0));
      div.dataset.traces = String(traces.length);
      div.dataset.scale = chart.scale === "log" ? "log" : "linear";
    });
  }

  new MutationObserver(function (records) {
    const swapped = records.some(function (r) {
      return Array.prototype.some.call(r.addedNodes, function (n) {
        return n.nodeType === 1 && n.matches('[data-fragment="job"]');
      });
    });
    if (swapped) load();
  }).observe(document.getElementById("main"), { childList: true, subtree: true });
  setInterval(function () { if (!document.hidden) load(); }, 15000);
  load();
})();
