/* Sharewise dashboard: poll each section's JSON endpoint and redraw with Plotly.react.
 *
 * Every endpoint answers {scope, generated_at, empty, summary, figures: {name: {data, layout}},
 * tables: {name: {columns, rows, note}}} (frontend/payloads/). A figure named N is drawn into
 * #fig-N and a table named N into #table-N. Requests go to this origin only. A section's
 * data-params names the page controls (#window-control, #rounds-control) whose values go into
 * its query; changing one redraws those sections at once and keeps the values in the page's URL. */
"use strict";

(function () {
  const POLL_MS = Number(document.body.dataset.pollMs) || 2000;
  const MAX_TABLE_ROWS = 500;
  const CONFIG = {responsive: true, displaylogo: false, modeBarButtonsToRemove: ["toImage"]};

  function renderTable(el, table) {
    const frag = document.createDocumentFragment();
    const t = document.createElement("table");
    const head = t.createTHead().insertRow();
    for (const c of table.columns) {
      const th = document.createElement("th");
      th.scope = "col";
      th.textContent = c;
      head.appendChild(th);
    }
    const body = t.createTBody();
    for (const row of table.rows.slice(0, MAX_TABLE_ROWS)) {
      const tr = body.insertRow();
      for (const cell of row) {
        const td = tr.insertCell();
        td.textContent = cell === null || cell === undefined ? "–" : String(cell);
        if (typeof cell === "number") td.className = "num";
      }
    }
    frag.appendChild(t);
    let note = table.note || "";
    if (table.rows.length > MAX_TABLE_ROWS) note += ` Showing ${MAX_TABLE_ROWS} of ${table.rows.length} rows.`;
    if (note) {
      const p = document.createElement("p");
      p.className = "note";
      p.textContent = note.trim();
      frag.appendChild(p);
    }
    el.replaceChildren(frag);
  }

  function render(section, payload) {
    const empty = section.querySelector(".empty");
    section.querySelector(".summary").textContent = payload.summary || "";
    empty.hidden = !payload.empty;
    empty.textContent = payload.empty || "";
    for (const div of section.querySelectorAll(".figure")) {
      const name = div.id.slice(4);
      const fig = payload.figures[name];
      if (fig && !payload.empty) {
        div.hidden = false;
        Plotly.react(div, fig.data, fig.layout, CONFIG);
      } else {
        div.hidden = true;
        Plotly.purge(div);
      }
    }
    for (const el of section.querySelectorAll(".table")) {
      const table = payload.tables[el.id.slice(6)];
      if (table && !payload.empty) renderTable(el, table);
      else el.replaceChildren();
    }
    section.dataset.updated = payload.generated_at;
  }

  const timers = new Map();

  function controlValue(name) {
    const el = document.getElementById(`${name}-control`);
    return el && el.checkValidity() && el.value !== "" ? el.value : null;
  }

  function endpointUrl(section) {
    const url = new URL(section.dataset.endpoint, window.location.href);
    for (const name of (section.dataset.params || "").split(" ").filter(Boolean)) {
      const value = controlValue(name);
      if (value !== null) url.searchParams.set(name, value);
    }
    return url.pathname + url.search;
  }

  async function poll(section) {
    const status = document.getElementById("poll-status");
    clearTimeout(timers.get(section));
    try {
      const response = await fetch(endpointUrl(section), {credentials: "same-origin",
                                                               headers: {Accept: "application/json"}});
      if (response.status === 401 || response.status === 403) {
        window.location.reload();  // the session ended: the page sends us to the login form
        return;
      }
      const payload = await response.json();
      if (!response.ok) throw new Error(payload.error || response.statusText);
      render(section, payload);
      status.textContent = `updated ${new Date().toLocaleTimeString()}`;
    } catch (err) {
      status.textContent = `update failed: ${err.message}; retrying`;
    } finally {
      timers.set(section, setTimeout(() => poll(section), document.hidden ? POLL_MS * 5 : POLL_MS));
    }
  }

  function controlChanged(name) {
    const value = controlValue(name);
    if (value === null) return;  // out of bounds or empty: keep polling with the last good value
    const page = new URL(window.location.href);
    page.searchParams.set(name, value);
    window.history.replaceState(null, "", page.pathname + page.search + page.hash);
    for (const section of document.querySelectorAll("section[data-endpoint]")) {
      if ((section.dataset.params || "").split(" ").includes(name)) poll(section);
    }
  }

  document.addEventListener("DOMContentLoaded", () => {
    for (const name of ["window", "rounds"]) {
      const el = document.getElementById(`${name}-control`);
      if (el) el.addEventListener("change", () => controlChanged(name));
    }
    document.getElementById("view-controls")?.addEventListener("submit", (event) => event.preventDefault());
    for (const section of document.querySelectorAll("section[data-endpoint]")) poll(section);
  });
})();
