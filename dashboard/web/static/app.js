// yidu dashboard page script. Plain JS, no build step, no CDN.
// Data is only ever written with textContent and DOM nodes: no HTML parsing.
"use strict";

// A status line (the demo setting up in the background): the list page
// reloads until it is gone, so the notice appears once registered.
(function () {
  if (document.getElementById("status-line") && document.getElementById("messages")) {
    setTimeout(() => location.reload(), 3000);
  }
})();

(function () {
  const root = document.getElementById("message");
  if (!root) return;
  const msgid = root.dataset.msgid;
  const api = "/api/v1/messages/" + encodeURIComponent(msgid);
  const csrf = document.querySelector('meta[name="csrf-token"]').content;
  const $ = (id) => document.getElementById(id);

  function el(tag, text, cls) {
    const e = document.createElement(tag);
    if (text !== undefined && text !== null) e.textContent = String(text);
    if (cls) e.className = cls;
    return e;
  }
  function fmtTime(s) {
    if (!s) return "–";
    const d = new Date(s);
    return d.toLocaleString();
  }
  function fmtETA(e) {
    if (!e) return "–";
    if (e.seconds <= 0) return "reached 已达";
    const s = e.seconds;
    if (s < 90) return Math.round(s) + " s";
    if (s < 5400) return Math.round(s / 60) + " min";
    return (s / 3600).toFixed(1) + " h";
  }
  async function getJSON(url) {
    const r = await fetch(url, { credentials: "same-origin", headers: { "Accept": "application/json" } });
    if (r.status === 401) { location.href = "/login"; throw new Error("signed out"); }
    if (!r.ok) throw new Error("HTTP " + r.status);
    return r.json();
  }

  // --- progress (SSE) -------------------------------------------------
  function showProgress(p) {
    $("read-count").textContent = p.read;
    $("recipient-count").textContent = p.recipients;
    $("unread-count").textContent = p.unread;
    $("percent").textContent = p.percent;
    $("progress-bar").value = p.percent;
    $("rate").textContent = p.rate_per_minute == null ? "–" : p.rate_per_minute.toFixed(1);
    $("eta-90").textContent = fmtETA(p.eta_90);
    $("eta-100").textContent = fmtETA(p.eta_100);
    if (p.by_signal) {
      $("signal-button").textContent = p.by_signal.button;
      $("signal-link").textContent = p.by_signal.link;
      $("signal-enter-agent").textContent = p.by_signal.enter_agent;
    }
    drawCurve(p);
  }

  const svgNS = "http://www.w3.org/2000/svg";
  function drawCurve(p) {
    const svg = $("curve");
    while (svg.firstChild) svg.removeChild(svg.firstChild);
    const pts = p.curve || [];
    if (!pts.length || !p.recipients) return;
    const t0 = new Date(p.sent_at).getTime();
    const t1 = Math.max(new Date(p.as_of).getTime(), new Date(pts[pts.length - 1].at).getTime() + 60000, t0 + 60000);
    const W = 600, H = 160;
    let cum = 0;
    const coords = ["0," + H];
    const xy = (t, n) => Math.max(0, Math.min(W, ((t - t0) / (t1 - t0)) * W)).toFixed(1) + "," +
      Math.max(0, H - (n / p.recipients) * H).toFixed(1);
    for (const c of pts) {
      // Flat until the minute the reads happened, then up across it: a
      // straight line from the send time would invent reads that did not happen.
      const start = new Date(c.at).getTime();
      coords.push(xy(start, cum));
      cum += c.reads;
      coords.push(xy(start + 60000 * p.bucket_minutes, cum));
    }
    const line = document.createElementNS(svgNS, "polyline");
    line.setAttribute("points", coords.join(" "));
    line.setAttribute("class", "line");
    svg.appendChild(line);
  }

  // Departments are heavier: refreshed at most every 10 s, and always once
  // after the last change, so the table never stays behind the numbers.
  let lastRefresh = 0, refreshTimer = null;
  function onProgress(p) {
    showProgress(p);
    if (refreshTimer) return;
    const wait = Math.max(0, lastRefresh + 10000 - Date.now());
    refreshTimer = setTimeout(() => {
      refreshTimer = null; lastRefresh = Date.now(); loadDepartments();
      // The people list follows too, unless the user paged further down.
      if (pages <= 1) { cursor = ""; loadRecipients(false); }
    }, wait);
  }

  if (window.EventSource) {
    const es = new EventSource(api + "/events");
    es.addEventListener("progress", (ev) => { $("live").classList.add("on"); onProgress(JSON.parse(ev.data)); });
    es.onerror = () => { $("live").classList.remove("on"); };
  } else {
    setInterval(() => getJSON(api + "/progress").then(onProgress).catch(() => {}), 5000);
  }
  getJSON(api + "/progress").then(showProgress).catch(() => {});

  // --- departments ----------------------------------------------------
  let depts = [];
  let sortKey = null, sortDir = 1;
  async function loadDepartments() {
    try {
      const d = await getJSON(api + "/departments");
      depts = d.departments;
      renderDepartments();
    } catch (e) { /* keep the last table */ }
  }
  function renderDepartments() {
    const rows = depts.slice();
    if (sortKey) {
      rows.sort((a, b) => {
        const x = a[sortKey], y = b[sortKey];
        return (typeof x === "string" ? x.localeCompare(y) : x - y) * sortDir;
      });
    }
    const tb = $("departments").tBodies[0];
    while (tb.firstChild) tb.removeChild(tb.firstChild);
    for (const d of rows) {
      const tr = el("tr");
      const name = el("td", null, "dept");
      const a = el("a", (sortKey ? "" : "\u00a0\u00a0".repeat(d.depth)) + d.name);
      a.dataset.dept = d.id;
      a.addEventListener("click", () => setDepartment(d.id, d.name));
      name.appendChild(a);
      tr.appendChild(name);
      tr.appendChild(el("td", d.recipients, "num"));
      tr.appendChild(el("td", d.read, "num"));
      tr.appendChild(el("td", d.unread, "num"));
      const pc = el("td", d.percent, "num");
      const bar = el("span", null, "pbar");
      const fill = el("i");
      fill.style.width = Math.min(100, d.percent) + "%";
      bar.appendChild(fill);
      pc.appendChild(bar);
      tr.appendChild(pc);
      tb.appendChild(tr);
    }
  }
  for (const th of document.querySelectorAll("#departments th[data-sort]")) {
    th.addEventListener("click", () => {
      const k = th.dataset.sort;
      sortDir = sortKey === k ? -sortDir : (k === "name" ? 1 : -1);
      sortKey = k;
      for (const o of document.querySelectorAll("#departments th")) o.classList.remove("sorted-asc", "sorted-desc");
      th.classList.add(sortDir > 0 ? "sorted-asc" : "sorted-desc");
      renderDepartments();
    });
  }

  // --- recipients -----------------------------------------------------
  let department = "", cursor = "", seq = 0, pages = 0;
  function query(withCursor) {
    const q = new URLSearchParams();
    q.set("state", $("state").value);
    if (department) q.set("department", department);
    const s = $("search").value.trim();
    if (s) q.set("q", s);
    if (withCursor && cursor) q.set("cursor", cursor);
    return q;
  }
  function updateExport() {
    const q = query(false);
    $("export").href = api + "/export.csv?" + q.toString();
    const st = $("state").value;
    $("export").textContent = st === "unread" ? "Export unread / 导出未读" : st === "read" ? "Export read / 导出已读" : "Export all / 导出全部";
  }
  async function loadRecipients(append) {
    pages = append ? pages + 1 : 1;
    const my = ++seq;
    const q = query(append);
    q.set("limit", "100");
    let d;
    try { d = await getJSON(api + "/recipients?" + q.toString()); } catch (e) { return; }
    if (my !== seq) return; // a newer search replaced this one
    const tb = $("recipients").tBodies[0];
    if (!append) while (tb.firstChild) tb.removeChild(tb.firstChild);
    $("recipient-total").textContent = d.total;
    for (const r of d.items) {
      const tr = el("tr");
      tr.appendChild(el("td", r.userid));
      tr.appendChild(el("td", r.name + (r.left ? " (left 已离职)" : "")));
      tr.appendChild(el("td", r.departments.map((x) => x.name || x.id).join(", ")));
      tr.appendChild(el("td", r.read ? (r.read_time ? fmtTime(r.read_time) : "read 已读") : "–"));
      tb.appendChild(tr);
    }
    cursor = d.next_cursor;
    $("more").hidden = !cursor;
  }
  function setDepartment(id, name) {
    department = String(id);
    $("department-name").textContent = name;
    $("department-filter").hidden = false;
    cursor = ""; updateExport(); loadRecipients(false);
  }
  $("department-clear").addEventListener("click", () => {
    department = ""; $("department-filter").hidden = true;
    cursor = ""; updateExport(); loadRecipients(false);
  });
  let timer = null;
  $("search").addEventListener("input", () => {
    clearTimeout(timer);
    timer = setTimeout(() => { cursor = ""; updateExport(); loadRecipients(false); }, 250);
  });
  $("state").addEventListener("change", () => { cursor = ""; updateExport(); loadRecipients(false); });
  $("filter").addEventListener("submit", (e) => e.preventDefault());
  $("more").addEventListener("click", () => loadRecipients(true));

  // --- remind ---------------------------------------------------------
  $("remind").addEventListener("click", async () => {
    if (!confirm("Send a reminder to everyone who has not read? / 提醒所有未读人员？")) return;
    const btn = $("remind");
    btn.disabled = true;
    $("remind-status").textContent = "…";
    try {
      const r = await fetch(api + "/remind", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
      const d = await r.json();
      if (r.ok) $("remind-status").textContent = "Reminded 已提醒 " + d.reminded;
      else if (r.status === 429) $("remind-status").textContent = "Already reminded; next at 下次可提醒 " + fmtTime(d.next_allowed_at);
      else $("remind-status").textContent = d.error || ("HTTP " + r.status);
    } catch (e) {
      $("remind-status").textContent = "Failed 失败";
    } finally {
      btn.disabled = false;
    }
  });

  // --- recall ---------------------------------------------------------
  $("recall").addEventListener("click", async () => {
    if (!confirm("Recall this notice from everyone's WeCom? Its numbers stop at this moment. / 从所有人的企业微信撤回此通知？统计将停在此刻。")) return;
    const btn = $("recall");
    btn.disabled = true;
    $("recall-status").textContent = "…";
    try {
      const r = await fetch(api + "/recall", { method: "POST", credentials: "same-origin", headers: { "X-CSRF-Token": csrf } });
      const d = await r.json();
      if (r.ok) {
        $("recall-status").textContent = "Recalled 已撤回";
        location.reload();
        return;
      }
      $("recall-status").textContent = d.error || ("HTTP " + r.status);
    } catch (e) {
      $("recall-status").textContent = "Failed 失败";
    }
    btn.disabled = false;
  });

  updateExport();
  loadDepartments();
  loadRecipients(false);
})();
